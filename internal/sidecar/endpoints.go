package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/sharestate/sharestate-operator/internal/metricsauth"
)

// The sidecar's HTTP endpoints by default. The sidecar shares the broker pod's network, so its ports
// must be none the broker's own processes take: not kubebuilder's :8443 and :8080, which Strimzi's
// Kafka agent binds in every broker pod, nor Strimzi's 9090 and up or the Apache Kafka image's 9092
// and 9093. 9087 and 9088, beside the Kafka listener's 9089, lie between the agent's ports and
// Strimzi's listeners, where Strimzi lets no listener go (docs/kafka-integration.md, "The sidecar's
// ports"). /metrics is served over HTTPS on every interface, or over plain HTTP on loopback only:
// anyone who reaches the pod could read it otherwise.
const (
	DefaultHealthProbeBindAddress = ":9087"
	DefaultSecureMetricsAddress   = ":9088"
	DefaultPlainMetricsAddress    = "127.0.0.1:9088"
)

// metricsAddress is where /metrics is served, "0" for nowhere.
func (c Config) metricsAddress() string {
	switch {
	case c.MetricsBindAddress != "":
		return c.MetricsBindAddress
	case c.SecureMetrics:
		return DefaultSecureMetricsAddress
	default:
		return DefaultPlainMetricsAddress
	}
}

// validateMetricsAddress refuses plain-HTTP metrics on an address other than loopback.
func (c Config) validateMetricsAddress() error {
	addr := c.metricsAddress()
	if c.SecureMetrics || addr == "0" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil // validateAddresses names the malformed address
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--metrics-bind-address=%q is not a loopback address (e.g. %s): plain-HTTP metrics are served on loopback only; "+
			"serve them securely (--metrics-secure) to serve them beyond the pod", addr, DefaultPlainMetricsAddress)
	}
	return nil
}

// serveEndpoints starts the health server and the metrics server that are enabled: the health
// server listens before it returns, the metrics server (which makes its certificate first) soon after.
// A failure to serve goes to errs. The returned function stops them.
func serveEndpoints(restCfg *rest.Config, cfg Config, ready func(context.Context) error, errs chan<- error) (stop func(), err error) {
	metrics, err := newMetricsServer(restCfg, cfg)
	if err != nil {
		return nil, err
	}
	profiles, _, err := serveProfiles(cfg, errs)
	if err != nil {
		return nil, err
	}
	var health *http.Server
	if addr := cfg.HealthProbeBindAddress; addr != "0" && addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("--health-probe-bind-address=%s: %w", addr, err)
		}
		health = &http.Server{Handler: HealthHandler(ready, cfg.Logger.WithName("health")), ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := health.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errs <- fmt.Errorf("serving health probes on %s: %w", addr, err)
			}
		}()
	}
	ctx, cancel := context.WithCancel(context.Background())
	metricsDone := make(chan struct{})
	if metrics == nil {
		close(metricsDone)
	} else {
		go func() {
			defer close(metricsDone)
			if err := metrics.Start(ctx); err != nil {
				errs <- fmt.Errorf("--metrics-bind-address=%s: %w", cfg.metricsAddress(), err)
			}
		}()
	}
	return func() {
		shutdownCtx, cancelShutdown := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancelShutdown()
		if health != nil {
			_ = health.Shutdown(shutdownCtx)
		}
		if profiles != nil {
			_ = profiles.Shutdown(shutdownCtx)
		}
		cancel()
		<-metricsDone
	}, nil
}

// serveProfiles serves Go's /debug/pprof handlers on PprofBindAddress and returns the server and
// the address it bound; nil when it is off. The address is logged: with port 0 it is the only way to
// learn it.
func serveProfiles(cfg Config, errs chan<- error) (*http.Server, net.Addr, error) {
	addr := cfg.PprofBindAddress
	if addr == "0" || addr == "" {
		return nil, nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--pprof-bind-address=%s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	cfg.Logger.Info("Serving Go's profiles", "address", ln.Addr().String())
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("serving profiles on %s: %w", addr, err)
		}
	}()
	return srv, ln.Addr(), nil
}

// newMetricsServer returns controller-runtime's metrics server of the registry the sidecar's and the
// persister's metrics are on, as the operator serves its own: over HTTPS, each scrape authenticated
// and authorized by the API server (internal/metricsauth), or over plain HTTP on loopback. Nil when
// metrics are off.
func newMetricsServer(restCfg *rest.Config, cfg Config) (metricsserver.Server, error) {
	opts := metricsserver.Options{BindAddress: cfg.metricsAddress()}
	if opts.BindAddress == "0" {
		return nil, nil
	}
	if cfg.SecureMetrics {
		opts.SecureServing = true
		opts.FilterProvider = metricsauth.FilterProvider
		opts.CertDir = cfg.MetricsCertDir
		// HTTP/1.1 only: HTTP/2's Stream Cancellation and Rapid Reset (CVE-2023-44487, CVE-2023-39325).
		opts.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	httpClient, err := rest.HTTPClientFor(restCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the metrics server's API client: %w", err)
	}
	srv, err := metricsserver.NewServer(opts, restCfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the metrics server: %w", err)
	}
	return srv, nil
}
