// Command sharestate-operator runs the operator that fences stale Kafka share-partition leaders,
// aggregates share groups and carries out their offset resets. Flags follow the kubebuilder defaults;
// --help lists them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharestate/sharestate-operator/internal/kubeconfig"
	"github.com/sharestate/sharestate-operator/internal/operator"
)

// namespaces is a repeatable (and comma-separated) --watch-namespace flag.
type namespaces []string

func (n *namespaces) String() string { return strings.Join(*n, ",") }

func (n *namespaces) Set(v string) error {
	for _, ns := range strings.Split(v, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			*n = append(*n, ns)
		}
	}
	return nil
}

func main() {
	var opts operator.Options
	var watch namespaces
	flag.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", "0",
		"address the metrics endpoint binds to, e.g. :8443 for HTTPS or :8080 for HTTP; 0 disables it")
	flag.BoolVar(&opts.SecureMetrics, "metrics-secure", true,
		"serve metrics over HTTPS, authenticated and authorized by the API server (false: plain HTTP)")
	flag.BoolVar(&opts.EnableHTTP2, "enable-http2", false,
		"allow HTTP/2 on the metrics server (off by default: HTTP/2 Stream Cancellation and Rapid Reset CVEs)")
	flag.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", "address of /healthz and /readyz; 0 disables them")
	flag.StringVar(&opts.PprofBindAddress, "pprof-bind-address", "0",
		"address of Go's /debug/pprof profiles, unauthenticated (bind it to loopback, e.g. 127.0.0.1:6060); 0 disables them")
	flag.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect a leader among replicas, so one operator is active at a time")
	flag.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's; required with --leader-elect outside a pod)")
	flag.Var(&watch, "watch-namespace", "namespace to watch (repeatable, or comma-separated); all namespaces when unset")
	flag.DurationVar(&opts.NotReadyGrace, "fence-not-ready-after", 0,
		"also fence a leader whose pod has not been Ready for this long (0: only gone, terminating, finished or replaced pods)")
	flag.IntVar(&opts.MaxConcurrentReconciles, "max-concurrent-reconciles", operator.DefaultMaxConcurrentReconciles, "fencing workers: partitions fenced at once")
	flag.DurationVar(&opts.TotalsRefresh, "group-totals-refresh", operator.DefaultTotalsRefresh, "how often group totals are recomputed")
	flag.DurationVar(&opts.PartitionResync, "partition-resync-period", operator.DefaultPartitionResync,
		"how often every SharePartitionState is listed to fence leaders whose pods went unseen, set missing leader-pod labels and refresh conditions")
	var qps float64
	flag.Float64Var(&qps, "kube-api-qps", operator.DefaultKubeAPIQPS, "client-side bound on requests per second to the API server")
	flag.IntVar(&opts.KubeAPIBurst, "kube-api-burst", operator.DefaultKubeAPIBurst, "client-side burst of requests to the API server")
	flag.BoolVar(&opts.KubeAPICompression, "kube-api-compression", false,
		"ask the API server to gzip its responses, watches included: less traffic, more CPU on both sides for every partition write")
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse() // controller-runtime's --kubeconfig is registered on the same flag set
	opts.WatchNamespaces = watch
	opts.KubeAPIQPS = float32(qps)
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	// What stops the operator before it starts is one line for a person, not a log entry with a stack.
	if err := errors.Join(opts.Validate(), checkLeaderElection(opts)); err != nil {
		fmt.Fprintf(os.Stderr, "sharestate-operator: invalid flags:\n%v\n", err)
		os.Exit(2)
	}
	ctx := ctrl.SetupSignalHandler()
	cfg, err := kubeconfig.Load()
	if err == nil {
		err = kubeconfig.CheckReachable(ctx, cfg)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharestate-operator:", err)
		os.Exit(1)
	}
	if err := run(ctx, cfg, opts); err != nil {
		ctrl.Log.Error(err, "Operator stopped")
		os.Exit(1)
	}
}

// inClusterNamespaceFile is where a pod's service account holds the pod's namespace, in which
// controller-runtime's leader election puts its Lease unless told another.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// checkLeaderElection refuses --leader-elect with no namespace for its Lease: outside a pod there is
// none to default to, and controller-runtime would say so only when the manager is built, in a
// logged stack trace.
func checkLeaderElection(opts operator.Options) error {
	if !opts.LeaderElection || opts.LeaderElectionNamespace != "" {
		return nil
	}
	if _, err := os.Stat(inClusterNamespaceFile); err == nil {
		return nil
	}
	return errors.New("--leader-elect needs --leader-election-namespace outside a pod: the namespace of the election's Lease, " +
		"which in a pod is the pod's own (" + inClusterNamespaceFile + ")")
}

func run(ctx context.Context, cfg *rest.Config, opts operator.Options) error {
	mgr, err := operator.NewManager(ctx, cfg, opts)
	if err != nil {
		return err
	}
	ctrl.Log.Info("Starting the operator", "watchNamespaces", opts.WatchNamespaces, "leaderElection", opts.LeaderElection)
	return mgr.Start(ctx)
}
