// Package operator wires the sharestate operator: a controller-runtime manager with the
// SharePartitionState (fencing) and ShareGroup (adoption, status, resets) reconcilers, health checks,
// metrics and leader election. cmd/sharestate-operator parses flags into Options and runs it; the tests
// and `make run` run the same manager.
package operator

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
	"github.com/sharestate/sharestate-operator/internal/metricsauth"
)

// Options configure the operator.
type Options struct {
	// MetricsBindAddress serves Prometheus metrics; "0" turns them off.
	MetricsBindAddress string
	// SecureMetrics serves metrics over HTTPS, authenticated and authorized through the API server.
	SecureMetrics bool
	// EnableHTTP2 allows HTTP/2 on the metrics server (off: CVE-2023-44487 and CVE-2023-39325).
	EnableHTTP2 bool
	// HealthProbeBindAddress serves /healthz and /readyz; "0" turns them off.
	HealthProbeBindAddress string
	// PprofBindAddress serves Go's /debug/pprof profiles, unauthenticated; "0" or empty (the
	// default) turns them off. Bind it to loopback and reach it with kubectl port-forward.
	PprofBindAddress string
	// LeaderElection makes one replica of the operator active at a time.
	LeaderElection bool
	// LeaderElectionNamespace holds the election's Lease (default: the pod's namespace).
	LeaderElectionNamespace string
	// WatchNamespaces restricts the operator to these namespaces; empty watches all.
	WatchNamespaces []string
	// NotReadyGrace, above zero, also fences a leader whose pod has not been Ready for that long.
	NotReadyGrace time.Duration
	// MaxConcurrentReconciles is the fencing reconciler's number of workers.
	MaxConcurrentReconciles int
	// TotalsRefresh is how often groups' totals are refreshed.
	TotalsRefresh time.Duration
	// PartitionResync is how often every partition is looked at: leaders whose pods went unseen,
	// leader-pod labels to set or repair, conditions and leader changes (default
	// controllers.DefaultResyncPeriod).
	PartitionResync time.Duration
	// KubeAPIQPS and KubeAPIBurst bound the operator's requests to the API server (client-side).
	KubeAPIQPS   float32
	KubeAPIBurst int
	// KubeAPICompression asks the API server for gzip-compressed responses, watches included. Off
	// by default: see NewManager.
	KubeAPICompression bool
}

// Default client-side limits. A broker's death fences all its partitions at once: one status update
// each. client-go's defaults (5 QPS; controller-runtime's config loader raises them to 20) would make
// fencing a thousand partitions take the better part of a minute. The API server protects itself with
// API Priority and Fairness; these bounds only keep a runaway operator in check.
const (
	DefaultKubeAPIQPS   = 500
	DefaultKubeAPIBurst = 1000
)

// DefaultMaxConcurrentReconciles is the fencing workers' default: the partitions fenced at once,
// enough to fence a broker's thousand partitions within a second or two without flooding the API
// server.
const DefaultMaxConcurrentReconciles = 16

// Scheme returns the scheme of everything the operator reads and writes.
func Scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := sharestatev1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// NewManager returns a manager with the operator's reconcilers registered; Start runs it.
func NewManager(ctx context.Context, cfg *rest.Config, opts Options) (ctrl.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = DefaultMaxConcurrentReconciles
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS >= 0 { // a negative QPS (no client-side limit) is kept as it is
		cfg.QPS, cfg.Burst = DefaultKubeAPIQPS, DefaultKubeAPIBurst
		if opts.KubeAPIQPS > 0 {
			cfg.QPS = opts.KubeAPIQPS
		}
		if opts.KubeAPIBurst > 0 {
			cfg.Burst = opts.KubeAPIBurst
		}
	}
	// From Kubernetes 1.37 the API server gzips a whole watch stream, event by event, for a client
	// that accepts gzip and watches with a streaming list, as informers do (WatchListCompression,
	// beta and on; k8s.io/apiserver v0.37.2, pkg/endpoints/handlers/watch.go, BeginStream), and it
	// gzips large lists. The operator's periodic lists of partitions would then cost compression on
	// the API server and decompression here, to save a little in-cluster traffic. Asking for no
	// compression turns it off for all the operator's requests.
	cfg.DisableCompression = !opts.KubeAPICompression
	// The operator watches no partition; this counts what its watches do receive, by resource.
	watches, err := newWatchBytes(ctrlmetrics.Registry)
	if err != nil {
		return nil, fmt.Errorf("registering the watch byte counter: %w", err)
	}
	cfg.Wrap(watches.wrap)
	// How long the API server takes to answer is the first thing to look at when fences are slow:
	// client-go's request latency, by verb, is opt-in in controller-runtime (the counts are not).
	ctrlmetrics.RegisterRESTClientMetrics(ctrlmetrics.MetricRequestLatency)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metricsOptions(opts),
		HealthProbeBindAddress:        opts.HealthProbeBindAddress,
		PprofBindAddress:              opts.PprofBindAddress,
		LeaderElection:                opts.LeaderElection,
		LeaderElectionID:              "sharestate-operator.sharestate.dev",
		LeaderElectionNamespace:       opts.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cacheOptions(opts.WatchNamespaces),
		// No reconciler reads a SharePartitionState from a cache: the client reads them from the
		// API server, so that no read starts an informer, whose watch would bring every write.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&sharestatev1.SharePartitionState{}}}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	live, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper()})
	if err != nil {
		return nil, fmt.Errorf("creating the API client: %w", err)
	}
	// What the operator knows of the partitions: filled by the fencing reconciler's resync and fences,
	// read by the ShareGroup reconciler.
	book := partitionbook.New()
	groups := &controllers.ShareGroupReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), LiveClient: live, Recorder: mgr.GetEventRecorder("sharestate-operator"),
		TotalsRefresh: opts.TotalsRefresh, Book: book,
	}
	partitions := &controllers.SharePartitionStateReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("sharestate-operator"),
		NotReadyGrace: opts.NotReadyGrace, MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		ResyncPeriod: opts.PartitionResync, Namespaces: opts.WatchNamespaces,
		PartitionChanged: groups.PartitionChanged, Book: book,
	}
	if err := partitions.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the SharePartitionState controller: %w", err)
	}
	if err := groups.SetupWithManager(ctx, mgr); err != nil {
		return nil, fmt.Errorf("setting up the ShareGroup controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.Add(controllers.NewPartitionsCollector(mgr.GetClient(), partitions)); err != nil {
		return nil, err
	}
	return mgr, nil
}

func metricsOptions(opts Options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: opts.MetricsBindAddress, SecureServing: opts.SecureMetrics}
	if opts.SecureMetrics {
		// Not filters.WithAuthenticationAndAuthorization, which answers 500 to a token the API server
		// refuses: metricsauth answers 401, as the API server does.
		m.FilterProvider = metricsauth.FilterProvider
	}
	if !opts.EnableHTTP2 {
		m.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
	}
	return m
}

// cacheOptions scopes the cache to the watched namespaces and keeps only what the reconcilers read:
// of a pod, what the fencing decision reads (identity, deletion, phase, readiness), since broker pods'
// specs are large and unused. The cache holds pods and ShareGroups, never SharePartitionStates (see
// NewManager's client options).
func cacheOptions(namespaces []string) cache.Options {
	opts := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: slimPod}},
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

func slimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	slim := &corev1.Pod{TypeMeta: pod.TypeMeta}
	slim.Name, slim.Namespace, slim.UID, slim.ResourceVersion = pod.Name, pod.Namespace, pod.UID, pod.ResourceVersion
	slim.CreationTimestamp, slim.DeletionTimestamp, slim.Generation = pod.CreationTimestamp, pod.DeletionTimestamp, pod.Generation
	slim.Status.Phase, slim.Status.Conditions = pod.Status.Phase, pod.Status.Conditions
	return slim, nil
}
