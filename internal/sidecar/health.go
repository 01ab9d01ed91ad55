package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"github.com/sharestate/sharestate-operator/internal/metricsreg"
)

// HealthHandler serves /healthz, which answers as long as the process serves HTTP, and /readyz, which
// answers 200 only while ready returns nil. The probes are plain HTTP that anyone who reaches the pod
// can read, so /readyz answers a fixed "not ready": why goes to log.
func HealthHandler(ready func(context.Context) error, log logr.Logger) http.Handler {
	mux := http.NewServeMux()
	alive := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
	mux.HandleFunc("/healthz", alive)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := ready(r.Context()); err != nil {
			log.Info("Readiness check failed", "error", err.Error())
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

// readiness is ready while every Kafka-protocol listener (the server's, and the proxy's in proxy mode)
// accepts connections, and nothing else. The Kubernetes API server is not part of it: in proxy mode
// the sidecar carries all of its broker's inter-broker traffic, replication included, and a pod that
// is not Ready can lose the DNS name its broker advertises; an API server out of reach only makes
// the share-state operations answer COORDINATOR_NOT_AVAILABLE, which Kafka's persister retries
// (docs/kafka-integration.md §4). watchAPIServer reports the API server instead.
func readiness(services []listening) func(context.Context) error {
	return func(context.Context) error {
		for _, s := range services {
			if !s.service.Serving() {
				return fmt.Errorf("%s on %s is not serving", s.name, s.address)
			}
		}
		return nil
	}
}

// APIServerCheck returns a check that the Kubernetes API server answers its own /readyz, which every
// client may read (the system:public-info-viewer role), so the sidecar needs no extra permission.
func APIServerCheck(cfg *rest.Config) (func(context.Context) error, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating a client for the API server's health: %w", err)
	}
	return func(ctx context.Context) error {
		if _, err := dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return fmt.Errorf("the Kubernetes API cannot be reached: %w", err)
		}
		return nil
	}, nil
}

// How often the sidecar checks that the API server answers, and how long one check may take.
const (
	apiCheckInterval = 10 * time.Second
	apiCheckTimeout  = 5 * time.Second
)

// apiServerWatch reports whether the Kubernetes API server answers: the gauge
// sharestate_sidecar_api_server_reachable, and a log line each time that changes.
type apiServerWatch struct {
	check     func(context.Context) error
	reachable prometheus.Gauge
	log       logr.Logger
	// known and up are the last outcome; known is false until the first check.
	known, up bool
}

// newAPIServerWatch registers the gauge on reg; it reads 0 until the first check succeeds.
func newAPIServerWatch(check func(context.Context) error, reg prometheus.Registerer, log logr.Logger) (*apiServerWatch, error) {
	var err error
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sharestate_sidecar_api_server_reachable",
		Help: "1 while the sidecar's last check of the Kubernetes API server (its /readyz) succeeded, else 0. Not part of the sidecar's readiness.",
	})
	metricsreg.Into(reg, &err, &gauge)
	if err != nil {
		return nil, err
	}
	gauge.Set(0)
	return &apiServerWatch{check: check, reachable: gauge, log: log}, nil
}

// run checks the API server at once and then every interval, until ctx ends.
func (w *apiServerWatch) run(ctx context.Context, interval, timeout time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		checkCtx, cancel := context.WithTimeout(ctx, timeout)
		err := w.check(checkCtx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		w.observe(err)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// observe records one check's outcome, and logs it when it differs from the last.
func (w *apiServerWatch) observe(err error) {
	up := err == nil
	if up {
		w.reachable.Set(1)
	} else {
		w.reachable.Set(0)
	}
	if w.known && w.up == up {
		return
	}
	w.known, w.up = true, up
	if up {
		w.log.Info("Kubernetes API server became reachable")
		return
	}
	// Share-state operations are answered COORDINATOR_NOT_AVAILABLE meanwhile; the Kafka listeners,
	// and the inter-broker traffic through the proxy, go on, and the sidecar stays ready.
	w.log.Info("Kubernetes API server became unreachable", "error", err.Error())
}

// startWatchingAPIServer checks the API server in the background (apiServerWatch) until ctx ends.
func startWatchingAPIServer(ctx context.Context, restCfg *rest.Config, reg prometheus.Registerer, log logr.Logger) error {
	check, err := APIServerCheck(restCfg)
	if err != nil {
		return err
	}
	w, err := newAPIServerWatch(check, reg, log)
	if err != nil {
		return err
	}
	go w.run(ctx, apiCheckInterval, apiCheckTimeout)
	return nil
}
