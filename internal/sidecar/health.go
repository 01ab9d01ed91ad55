package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// probeTimeout bounds one readiness check of the Kubernetes API for a prober that would wait longer
// (the kubelet gives up after the probe's timeoutSeconds, and its request's context ends with it).
const probeTimeout = 2 * time.Second

// HealthHandler serves /healthz, which answers as long as the process serves HTTP, and /readyz, which answers 200 only while ready returns nil. The probes are plain HTTP
// that anyone who reaches the pod can read, so /readyz answers a fixed "not ready": why (which can
// name the API server's address) goes to log.
func HealthHandler(ready func(context.Context) error, log logr.Logger) http.Handler {
	mux := http.NewServeMux()
	alive := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
	mux.HandleFunc("/healthz", alive)
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), probeTimeout)
		defer cancel()
		if err := ready(ctx); err != nil {
			log.Info("Readiness check failed", "error", err.Error())
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
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

// readiness is ready when every Kafka-protocol listener (the server's, and the proxy's in proxy
// mode) accepts connections and the Kubernetes API answers: without the API every operation would
// be answered COORDINATOR_NOT_AVAILABLE.
func readiness(services []listening, apiServer func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		for _, s := range services {
			if !s.service.Serving() {
				return fmt.Errorf("%s on %s is not serving", s.name, s.address)
			}
		}
		return apiServer(ctx)
	}
}
