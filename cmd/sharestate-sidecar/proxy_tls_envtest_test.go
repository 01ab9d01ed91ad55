package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// testCA signs the certificates of a test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate for 127.0.0.1 named name, for servers and clients, as PEM and as a
// tls.Certificate.
func (ca *testCA) issue(t *testing.T, name string) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, pair
}

// writeAtomically replaces a file as a Secret volume's update does: a new file renamed over it.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestProxyModeTLS: the proxy terminates TLS with the certificate it is given, requires a client
// certificate its CA signed (and then answers keys 83–87 under --proxy-require-authentication, the
// verified client being authenticated), speaks TLS to a kfake upstream, and serves a renewed
// certificate once the files change.
func TestProxyModeTLS(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	ca := newTestCA(t)
	dir := t.TempDir()
	files := map[string]string{}
	for _, f := range []string{"ca.crt", "tls.crt", "tls.key"} {
		files[f] = filepath.Join(dir, f)
	}
	serverCert, serverKey, serverPair := ca.issue(t, "proxy-1")
	writeAtomically(t, files["ca.crt"], ca.pem)
	writeAtomically(t, files["tls.crt"], serverCert)
	writeAtomically(t, files["tls.key"], serverKey)
	_, _, clientPair := ca.issue(t, "broker-2")
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	proxyAddr := freeAddr(t)
	var upstream string
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{serverPair}, MinVersion: tls.VersionTLS12}),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			upstream = ln.Addr().String()
			return advertised{Listener: ln, proxy: proxyAddr}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	startSidecar(t, ns, sidecarOptions{args: []string{
		"--proxy-listen-address=" + proxyAddr, "--proxy-upstream-address=" + upstream, "--proxy-require-authentication",
		"--proxy-tls-cert-file=" + files["tls.crt"], "--proxy-tls-key-file=" + files["tls.key"], "--proxy-tls-client-ca-file=" + files["ca.crt"],
		"--proxy-upstream-tls", "--proxy-upstream-tls-ca-file=" + files["ca.crt"],
	}})

	clientTLS := &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{clientPair}, MinVersion: tls.VersionTLS12}
	k := newKafka(t, proxyAddr, kgo.DialTLSConfig(clientTLS), kgo.DefaultProduceTopic("events"))
	expectCode(t, "initialize over TLS", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := k.cl.ProduceSync(ctx, &kgo.Record{Value: []byte("over TLS both ways")}).FirstErr(); err != nil {
		t.Fatalf("producing over TLS through the proxy: %v", err)
	}

	// Without a client certificate the handshake is refused.
	noCert, err := tls.Dial("tcp", proxyAddr, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err == nil {
		_ = noCert.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = noCert.Read(make([]byte, 1))
		_ = noCert.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate was served")
	}

	// A rotated client CA is trusted by the next connection, and the old one no longer.
	newCA := newTestCA(t)
	_, _, newClientPair := newCA.issue(t, "broker-3")
	writeAtomically(t, files["ca.crt"], newCA.pem)
	if err := tlsHandshake(proxyAddr, &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{newClientPair}, MinVersion: tls.VersionTLS12}); err != nil {
		t.Fatalf("a client of the rotated CA: %v", err)
	}
	if err := tlsHandshake(proxyAddr, clientTLS); err == nil {
		t.Fatal("a client of the CA rotated out was served")
	}
	writeAtomically(t, files["ca.crt"], ca.pem)

	// A renewed certificate is served to new connections.
	renewedCert, renewedKey, _ := ca.issue(t, "proxy-2")
	writeAtomically(t, files["tls.key"], renewedKey)
	writeAtomically(t, files["tls.crt"], renewedCert)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := tls.Dial("tcp", proxyAddr, clientTLS)
		if err != nil {
			t.Fatal(err)
		}
		name := c.ConnectionState().PeerCertificates[0].Subject.CommonName
		_ = c.Close()
		if name == "proxy-2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the proxy still serves %q, 20s after its certificate was renewed", name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tlsHandshake connects to addr with cfg and sends an ApiVersions request: nil once its response
// arrives (the proxy served the client), the error otherwise (a refused client certificate shows at
// the first read under TLS 1.3).
func tlsHandshake(addr string, cfg *tls.Config) error {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	if _, err := c.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)); err != nil {
		return err
	}
	_, err = kafkawire.ReadFrame(c, 1<<20)
	return err
}
