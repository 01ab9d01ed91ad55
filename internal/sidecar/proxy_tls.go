package sidecar

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// ProxyTLS is the proxy's TLS, both ways. Towards its clients (the other brokers), TLS is terminated
// with CertFile and KeyFile, read again whenever they change; with ClientCAFile, every client must
// present a certificate that CA signed. Towards the upstream, with Upstream, the proxy speaks TLS,
// verifying the broker's certificate against UpstreamCAFile (default: the system's roots) for
// UpstreamServerName (default: the upstream address's host).
type ProxyTLS struct {
	CertFile, KeyFile, ClientCAFile string

	Upstream           bool
	UpstreamCAFile     string
	UpstreamServerName string
}

// validate names every TLS flag given without the ones it needs.
func (t ProxyTLS) validate() []error {
	var errs []error
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs = append(errs, errors.New("--proxy-tls-cert-file and --proxy-tls-key-file go together"))
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		errs = append(errs, errors.New("--proxy-tls-client-ca-file needs --proxy-tls-cert-file and --proxy-tls-key-file"))
	}
	if !t.Upstream && (t.UpstreamCAFile != "" || t.UpstreamServerName != "") {
		errs = append(errs, errors.New("--proxy-upstream-tls-ca-file and --proxy-upstream-tls-server-name need --proxy-upstream-tls"))
	}
	return errs
}

// serverConfig is the TLS the proxy terminates, nil for none. The certificate is watched until ctx
// ends.
func (t ProxyTLS) serverConfig(ctx context.Context, log logr.Logger) (*tls.Config, error) {
	if t.CertFile == "" {
		return nil, nil
	}
	watcher, err := certwatcher.New(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the proxy's certificate: %w", err)
	}
	go func() {
		if err := watcher.Start(ctx); err != nil {
			log.Error(err, "Watching the proxy's certificate failed; the one loaded last is served")
		}
	}()
	cfg := &tls.Config{GetCertificate: watcher.GetCertificate, MinVersion: tls.VersionTLS12}
	if t.ClientCAFile == "" {
		return cfg, nil
	}
	cas := &clientCAs{file: t.ClientCAFile, log: log}
	if cfg.ClientCAs, err = certPool(t.ClientCAFile); err != nil {
		return nil, err
	}
	cas.pool = cfg.ClientCAs
	cfg.ClientAuth = tls.RequireAndVerifyClientCert
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		each := cfg.Clone()
		each.GetConfigForClient = nil
		each.ClientCAs = cas.current()
		return each, nil
	}
	return cfg, nil
}

// clientCAs is the pool of client CA certificates, read again from its file at each TLS handshake so
// that a rotated CA (a Secret volume's update) is trusted by the next connection without a restart.
// Inter-broker connections are long-lived, so handshakes, and these reads, are rare. A file that
// cannot be read or holds no certificate leaves the last good pool in use.
type clientCAs struct {
	file string
	log  logr.Logger

	mu      sync.Mutex
	lastErr string
	pool    *x509.CertPool
}

func (c *clientCAs) current() *x509.CertPool {
	pool, err := certPool(c.file)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if err.Error() != c.lastErr { // once per distinct failure, not per handshake
			c.log.Error(err, "Reading the proxy's client CA certificates failed; the ones read last are used", "file", c.file)
		}
		c.lastErr = err.Error()
		return c.pool
	}
	c.lastErr, c.pool = "", pool
	return pool
}

// upstreamDial dials the upstream over TLS, nil for plain TCP.
func (t ProxyTLS) upstreamDial(timeout time.Duration) (func(ctx context.Context, network, address string) (net.Conn, error), error) {
	if !t.Upstream {
		return nil, nil
	}
	cfg := &tls.Config{ServerName: t.UpstreamServerName, MinVersion: tls.VersionTLS12}
	if t.UpstreamCAFile != "" {
		var err error
		if cfg.RootCAs, err = certPool(t.UpstreamCAFile); err != nil {
			return nil, err
		}
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	return d.DialContext, nil
}

func certPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading CA certificates: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", file)
	}
	return pool, nil
}
