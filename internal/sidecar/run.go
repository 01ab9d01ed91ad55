package sidecar

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/prommetrics"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire/serve"
)

// Config is what the sidecar process runs with: cmd/sharestate-sidecar's flags.
type Config struct {
	// ListenAddress is where the Kafka protocol is served; loopback by default, since its only
	// client is the broker in the same pod.
	ListenAddress string
	// ProxyListenAddress and ProxyUpstreamAddress, set together, turn proxy mode on beside the direct
	// listener: every connection to ProxyListenAddress is forwarded to ProxyUpstreamAddress (the
	// broker's real inter-broker listener), except API keys 83–87, which the persister answers.
	ProxyListenAddress   string
	ProxyUpstreamAddress string
	// ProxyRequireAuthentication answers keys 83–87 only on connections whose SASL authentication the
	// upstream accepted (serve.ProxyOptions.RequireAuthentication): for a SASL upstream listener.
	ProxyRequireAuthentication bool
	// ProxyTLS is the proxy's TLS towards its clients and towards the upstream.
	ProxyTLS ProxyTLS
	// ProxyMetadataInterval is how often proxy mode reads the upstream's metadata, to report a broker
	// advertised around the proxy and delete the state of deleted topics (upstream_metadata.go); 0 never.
	ProxyMetadataInterval time.Duration
	// HealthProbeBindAddress serves /healthz and /readyz over plain HTTP, for the kubelet's probes; "0"
	// disables it.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles, unauthenticated; "0" or empty disables
	// them. Meant for loopback (reached with kubectl port-forward).
	PprofBindAddress string
	// MetricsBindAddress serves /metrics; "0" disables it. Empty is DefaultSecureMetricsAddress, or
	// DefaultPlainMetricsAddress without SecureMetrics.
	MetricsBindAddress string
	// SecureMetrics serves /metrics over HTTPS, and only to a scraper whose token the API server
	// accepts and whose user it allows to get /metrics. Without it /metrics is plain HTTP, and
	// MetricsBindAddress must be a loopback address.
	SecureMetrics bool
	// MetricsCertDir holds the certificate (tls.crt) and key (tls.key) of /metrics over HTTPS; without
	// them the sidecar serves a self-signed certificate.
	MetricsCertDir string
	// Namespace holds the broker's ShareGroups and SharePartitionStates.
	Namespace string
	// Identity is the broker this sidecar serves: its pod is labelled with the broker id
	// (sharestatev1.LabelBrokerID), and it is recorded as leader of the partitions its own broker
	// reads and writes. Requests another broker sent record that broker's pod, found by its label.
	Identity persister.Identity

	MaxRequestBytes          int32
	MaxQueuedRequestBytes    int64
	IdleTimeout              time.Duration
	RequestTimeout           time.Duration
	MaxInFlightPerConnection int
	// ShutdownTimeout bounds the drain of requests in flight on SIGTERM.
	ShutdownTimeout time.Duration
	// OperationTimeout, MaxPendingWrites and MaxCacheBytes are the persister's (persister.Options); 0
	// for its default.
	OperationTimeout time.Duration
	MaxPendingWrites int
	MaxCacheBytes    int64
	// WriteQPS and WriteBurst limit the persister's Kubernetes API requests for Writes; BulkQPS and
	// BulkBurst those for Read, Initialize, Delete and ReadSummary. Two limiters: a broker's Read of
	// every partition it leads after a failover must not hold up the Writes of the partitions it
	// already leads. A QPS of 0 or below means no client-side limit.
	WriteQPS, BulkQPS     float32
	WriteBurst, BulkBurst int

	Logger logr.Logger
}

// ProxyMode reports whether the configuration turns proxy mode on.
func (c Config) ProxyMode() bool { return c.ProxyListenAddress != "" && c.ProxyUpstreamAddress != "" }

// kafkaService is a Kafka-protocol service of the sidecar on a listener of its own: the direct
// server, or the proxy.
type kafkaService interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Serving() bool
}

// listening is a service, the address it serves on and the flag that set it, and the TLS it
// terminates (nil: none).
type listening struct {
	name    string
	flag    string
	address string
	service kafkaService
	tls     *tls.Config
}

// Run serves the Kafka protocol (directly, and through the proxy in proxy mode), health and metrics
// until ctx ends, then shuts down: it stops accepting, reports not ready, drains the requests in
// flight (at most ShutdownTimeout), and returns.
func Run(ctx context.Context, restCfg *rest.Config, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	services, err := newServices(ctx, restCfg, cfg)
	if err != nil {
		return err
	}
	// Other brokers' sidecars find this broker's pod by its label, to record it as a leader.
	labelCtx, stopLabelling := context.WithCancel(ctx)
	defer stopLabelling()
	if err := startLabellingOwnPod(labelCtx, restCfg, cfg); err != nil {
		return err
	}
	watcher, err := newMetadataWatcher(restCfg, cfg) // nil unless proxy mode reads the upstream's metadata
	if err != nil {
		return err
	}
	// Whether the API server answers is a metric and a log line, not readiness (health.go).
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	if err := startWatchingAPIServer(watchCtx, restCfg, ctrlmetrics.Registry, cfg.Logger.WithName("health")); err != nil {
		return err
	}
	// The probes answer before the Kafka listeners do: not ready until they serve.
	errs := make(chan error, 2+len(services))
	stopHTTP, err := serveEndpoints(restCfg, cfg, readiness(services), errs)
	if err != nil {
		return err
	}
	lns := make([]net.Listener, 0, len(services))
	for _, s := range services {
		ln, err := net.Listen("tcp", s.address)
		if err != nil {
			for _, l := range lns {
				_ = l.Close()
			}
			stopHTTP()
			return fmt.Errorf("%s=%s: %w", s.flag, s.address, err)
		}
		if s.tls != nil {
			ln = tls.NewListener(ln, s.tls)
		}
		lns = append(lns, ln)
	}
	for i, s := range services {
		go func() { errs <- s.service.Serve(lns[i]) }()
		cfg.Logger.Info("Serving "+s.name, "address", lns[i].Addr().String(), "namespace", cfg.Namespace,
			"brokerId", cfg.Identity.BrokerID, "pod", cfg.Identity.PodName)
	}
	if watcher != nil { // the proxy is the last service: its port is the one the broker must advertise
		go watcher.run(watchCtx, lns[len(lns)-1].Addr())
	}

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errs:
	}
	cfg.Logger.Info("Shutting down", "drainTimeout", cfg.ShutdownTimeout)
	drainCtx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	runErr = errors.Join(runErr, shutdownAll(drainCtx, services))
	stopHTTP()
	return runErr
}

// shutdownAll drains every service at once, under the same deadline.
func shutdownAll(ctx context.Context, services []listening) error {
	errs := make([]error, len(services))
	var wg sync.WaitGroup
	for i, s := range services {
		wg.Go(func() { errs[i] = s.service.Shutdown(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// newServices builds the persister on clients of its own, the server on it, and in proxy mode the
// proxy on the same persister.
func newServices(ctx context.Context, restCfg *rest.Config, cfg Config) ([]listening, error) {
	store, err := newStore(restCfg, cfg)
	if err != nil {
		return nil, err
	}
	serverObserver, err := prommetrics.NewServerObserver(ctrlmetrics.Registry)
	if err != nil {
		return nil, fmt.Errorf("registering the server's metrics: %w", err)
	}
	srv, err := serve.NewServer(serve.ServerOptions{
		Store: store, MaxRequestBytes: cfg.MaxRequestBytes, MaxQueuedRequestBytes: cfg.MaxQueuedRequestBytes,
		IdleTimeout: cfg.IdleTimeout, RequestTimeout: cfg.RequestTimeout,
		MaxInFlightPerConnection: cfg.MaxInFlightPerConnection, Logger: cfg.Logger.WithName("server"),
		Observer: serverObserver,
	})
	if err != nil {
		return nil, err
	}
	services := []listening{{name: "the share-state persister over the Kafka protocol", flag: "--listen-address", address: cfg.ListenAddress, service: srv}}
	if !cfg.ProxyMode() {
		return services, nil
	}
	proxyService, err := newProxy(ctx, store, serverObserver, cfg)
	if err != nil {
		return nil, err
	}
	return append(services, proxyService), nil
}

// newProxy builds the proxy of proxy mode on store, with its TLS; the requests it answers itself
// are counted by the server's observer, as the server's own are.
func newProxy(ctx context.Context, store sharestate.Store, serverObserver serve.ServerObserver, cfg Config) (listening, error) {
	proxyObserver, err := prommetrics.NewProxyObserver(ctrlmetrics.Registry)
	if err != nil {
		return listening{}, fmt.Errorf("registering the proxy's metrics: %w", err)
	}
	serverTLS, err := cfg.ProxyTLS.serverConfig(ctx, cfg.Logger.WithName("proxy"))
	if err != nil {
		return listening{}, err
	}
	const dialTimeout = 10 * time.Second
	dial, err := cfg.ProxyTLS.upstreamDial(dialTimeout)
	if err != nil {
		return listening{}, err
	}
	proxy, err := serve.NewProxy(serve.ProxyOptions{
		Dial: dial, DialTimeout: dialTimeout,
		Store: store, Upstream: cfg.ProxyUpstreamAddress, RequireAuthentication: cfg.ProxyRequireAuthentication,
		MaxRequestBytes:       cfg.MaxRequestBytes,
		MaxQueuedRequestBytes: cfg.MaxQueuedRequestBytes, RequestTimeout: cfg.RequestTimeout,
		IdleTimeout: cfg.IdleTimeout, MaxInFlightPerConnection: cfg.MaxInFlightPerConnection, Logger: cfg.Logger.WithName("proxy"),
		Observer: proxyObserver, ServerObserver: serverObserver,
	})
	if err != nil {
		return listening{}, err
	}
	return listening{name: "the Kafka-protocol proxy to " + cfg.ProxyUpstreamAddress,
		flag: "--proxy-listen-address", address: cfg.ProxyListenAddress, service: proxy, tls: serverTLS}, nil
}

// newStore builds the persister on clients of its own.
func newStore(restCfg *rest.Config, cfg Config) (*persister.Persister, error) {
	scheme := k8sruntime.NewScheme()
	if err := sharestatev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := corev1.AddToScheme(scheme); err != nil { // the pods of the brokers that send requests
		return nil, err
	}
	writes, err := limitedClient(restCfg, scheme, cfg.WriteQPS, cfg.WriteBurst)
	if err != nil {
		return nil, err
	}
	bulk, err := limitedClient(restCfg, scheme, cfg.BulkQPS, cfg.BulkBurst)
	if err != nil {
		return nil, err
	}
	observer, err := prommetrics.NewPersisterObserver(ctrlmetrics.Registry)
	if err != nil {
		return nil, fmt.Errorf("registering the persister's metrics: %w", err)
	}
	return persister.New(persister.Options{
		Client: writes, BulkClient: bulk, Namespace: cfg.Namespace, Identity: cfg.Identity,
		// In proxy mode most Reads and Writes come from other brokers (kafkawire names the sender).
		Senders:          persister.NewPodResolver(writes, cfg.Namespace, persister.DefaultResolveTTL),
		OperationTimeout: cfg.OperationTimeout, MaxPendingWrites: cfg.MaxPendingWrites, MaxCacheBytes: cfg.MaxCacheBytes,
		Observer: observer, Logger: cfg.Logger.WithName("persister"),
	})
}

// limitedClient is a Kubernetes client with a client-side rate limiter of its own (none for qps <= 0).
func limitedClient(restCfg *rest.Config, scheme *k8sruntime.Scheme, qps float32, burst int) (client.Client, error) {
	cfg := rest.CopyConfig(restCfg)
	cfg.QPS, cfg.Burst, cfg.RateLimiter = qps, burst, nil
	if qps > 0 {
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1))
	} else {
		cfg.QPS = -1 // client-go: no limiter
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client: %w", err)
	}
	return c, nil
}
