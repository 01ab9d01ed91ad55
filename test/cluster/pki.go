package cluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The cluster's identities, each a client certificate of the cluster's one CA. Their names are the
// ones Kubernetes' bootstrap RBAC binds (system:kube-controller-manager, system:kube-scheduler,
// system:kube-proxy) or the Node authorizer recognises (system:node:<name> in system:nodes), so each
// component runs with the rights a real cluster gives it, no more.
type identity struct {
	file   string // <file>.crt and <file>.key in the PKI directory
	user   string
	groups []string
}

var (
	adminIdentity      = identity{file: "admin", user: "cluster-admin", groups: []string{"system:masters"}}
	controllerIdentity = identity{file: "kube-controller-manager", user: "system:kube-controller-manager"}
	schedulerIdentity  = identity{file: "kube-scheduler", user: "system:kube-scheduler"}
	proxyIdentity      = identity{file: "kube-proxy", user: "system:kube-proxy"}
	// The API server's identity towards the kubelet (logs, exec, port-forward): the kubelet asks the
	// API server whether it may, and system:masters may.
	kubeletClientIdentity = identity{file: "apiserver-kubelet-client", user: "kube-apiserver", groups: []string{"system:masters"}}
)

func nodeIdentity(node string) identity {
	return identity{file: "kubelet", user: "system:node:" + node, groups: []string{"system:nodes"}}
}

// pki is the cluster's certificate authority and the files it signed, in dir.
type pki struct {
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

// newPKI makes a CA, the API server's serving certificate for ip and the cluster's service IP, the
// service-account signing key, and a client certificate for each identity.
func newPKI(dir string, ip, serviceIP net.IP, ids ...identity) (*pki, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	p := &pki{dir: dir}
	if err := p.makeCA(); err != nil {
		return nil, err
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"},
		IPAddresses: []net.IP{ip, serviceIP, net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if err := p.sign("apiserver", serving); err != nil {
		return nil, err
	}
	for _, id := range ids {
		client := &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := p.sign(id.file, client); err != nil {
			return nil, err
		}
	}
	return p, p.makeServiceAccountKey()
}

func (p *pki) makeCA() error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "sharestate-test-cluster-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	if p.caCert, err = x509.ParseCertificate(der); err != nil {
		return err
	}
	p.caKey = key
	return writeCertAndKey(p.path("ca"), der, key)
}

var serial = big.NewInt(1)

// sign issues tmpl, with a key of its own, as <name>.crt and <name>.key.
func (p *pki) sign(name string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	serial = new(big.Int).Add(serial, big.NewInt(1))
	tmpl.SerialNumber = serial
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		return fmt.Errorf("signing %s: %w", name, err)
	}
	return writeCertAndKey(p.path(name), der, key)
}

// signServing issues a serving certificate for host and ip as <name>.crt and <name>.key.
func (p *pki) signServing(name, host string, ip net.IP) error {
	return p.sign(name, &x509.Certificate{
		Subject:     pkix.Name{CommonName: host},
		DNSNames:    []string{host},
		IPAddresses: []net.IP{ip},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// makeServiceAccountKey writes the key the API server signs service-account tokens with (sa.key) and
// checks them with (sa.pub); kube-controller-manager signs the legacy token secrets with it too.
func (p *pki) makeServiceAccountKey() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := writePEM(p.path("sa.key"), "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key)); err != nil {
		return err
	}
	return writePEM(p.path("sa.pub"), "PUBLIC KEY", pub)
}

func writeCertAndKey(base string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(base+".crt", "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(base+".key", "EC PRIVATE KEY", keyDER)
}

func writePEM(path, blockType string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600)
}
