// Command sharestate-sidecar runs beside a Kafka broker and serves the share-state persister's five
// operations (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
// DeleteShareGroupState, ReadShareGroupStateSummary) over Kafka's wire protocol, storing the state
// in SharePartitionState resources of the pod's namespace. --help lists the flags.
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharestate/sharestate-operator/internal/kubeconfig"
	"github.com/sharestate/sharestate-operator/internal/sidecar"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// flags are the command line: the sidecar's configuration and the Kubernetes client's.
type flags struct {
	sidecar.Config
	zap zap.Options
}

func parseFlags() *flags {
	f := &flags{}
	cfg := &f.Config
	cfg.WriteQPS, cfg.BulkQPS = 200, 100
	flag.StringVar(&cfg.ListenAddress, "listen-address", kafkawire.DefaultAddress,
		"address of the Kafka-protocol listener (loopback: the broker in the same pod is its only client)")
	flag.StringVar(&cfg.ProxyListenAddress, "proxy-listen-address", "",
		"address of the Kafka-protocol proxy, the one the broker's advertised.listeners names for its inter-broker listener; "+
			"with --proxy-upstream-address it turns proxy mode on (default: off)")
	flag.StringVar(&cfg.ProxyUpstreamAddress, "proxy-upstream-address", "",
		"the broker's real inter-broker listener (on loopback), to which the proxy forwards every request but the share-state ones (API keys 83-87)")
	flag.BoolVar(&cfg.ProxyRequireAuthentication, "proxy-require-authentication", false,
		"answer the share-state requests (API keys 83-87) only on proxied connections whose SASL authentication the upstream accepted; "+
			"set it when the upstream listener is SASL, or the proxy answers clients the broker would refuse")
	flag.StringVar(&cfg.ProxyTLS.CertFile, "proxy-tls-cert-file", "", "PEM certificate the proxy's listener serves TLS with, read again when it changes (default: plain TCP)")
	flag.StringVar(&cfg.ProxyTLS.KeyFile, "proxy-tls-key-file", "", "PEM key of --proxy-tls-cert-file")
	flag.StringVar(&cfg.ProxyTLS.ClientCAFile, "proxy-tls-client-ca-file", "",
		"PEM CA certificates: the proxy's clients must present a certificate they signed (a verified client counts as authenticated)")
	flag.BoolVar(&cfg.ProxyTLS.Upstream, "proxy-upstream-tls", false, "speak TLS to the upstream")
	flag.StringVar(&cfg.ProxyTLS.UpstreamCAFile, "proxy-upstream-tls-ca-file", "", "PEM CA certificates the upstream's certificate is verified with (default: the system's)")
	flag.StringVar(&cfg.ProxyTLS.UpstreamServerName, "proxy-upstream-tls-server-name", "", "name the upstream's certificate is verified for (default: the upstream address's host)")
	flag.DurationVar(&cfg.ProxyMetadataInterval, "proxy-metadata-interval", sidecar.DefaultProxyMetadataInterval,
		"in proxy mode, how often the upstream's metadata is read: to report (log, event, metric) a broker that advertises another "+
			"port than the proxy's for its inter-broker listener, and to delete the SharePartitionStates of deleted topics; 0 disables both")
	flag.StringVar(&cfg.HealthProbeBindAddress, "health-probe-bind-address", sidecar.DefaultHealthProbeBindAddress,
		"address of /healthz and /readyz, plain HTTP for the kubelet's probes; 0 disables them")
	flag.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", "",
		`address of /metrics; 0 disables it (default "`+sidecar.DefaultSecureMetricsAddress+`", or "`+
			sidecar.DefaultPlainMetricsAddress+`" with --metrics-secure=false)`)
	flag.BoolVar(&cfg.SecureMetrics, "metrics-secure", true,
		"serve /metrics over HTTPS, to scrapers whose token and access to /metrics the API server accepts (the service account "+
			"needs to create tokenreviews and subjectaccessreviews); false: plain HTTP, on a loopback address only")
	flag.StringVar(&cfg.MetricsCertDir, "metrics-cert-dir", "",
		"directory of tls.crt and tls.key for /metrics over HTTPS (default: a self-signed certificate)")
	flag.StringVar(&cfg.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the share-state resources (default: $POD_NAMESPACE)")
	cfg.Identity.BrokerID = -1
	flag.Func("broker-id", "the Kafka broker id (node.id) of the broker this sidecar serves (required)", func(v string) error {
		id, err := strconv.ParseInt(v, 10, 32)
		cfg.Identity.BrokerID = int32(id)
		return err
	})
	flag.StringVar(&cfg.Identity.PodName, "pod-name", os.Getenv("POD_NAME"), "name of the broker's pod, recorded as the leader (default: $POD_NAME)")
	flag.StringVar(&cfg.Identity.PodUID, "pod-uid", os.Getenv("POD_UID"), "UID of the broker's pod, recorded as the leader (default: $POD_UID)")
	cfg.MaxRequestBytes = kafkawire.DefaultMaxRequestBytes
	flag.Func("max-request-bytes", "largest request accepted; a larger one closes its connection (default 8388608, 8 MiB: "+
		"a partition's largest Write, 2000 state batches of 20 bytes, is 40 KB, so this holds over 200 of them in one request)",
		func(v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			cfg.MaxRequestBytes = int32(n)
			return err
		})
	flag.Int64Var(&cfg.MaxQueuedRequestBytes, "max-queued-request-bytes", 4*kafkawire.DefaultMaxRequestBytes,
		"request bytes held at once over all connections, from a request's size field until its answer; beyond it, reading waits "+
			"(Kafka's queued.max.request.bytes; at least --max-request-bytes)")
	flag.DurationVar(&cfg.IdleTimeout, "idle-timeout", 10*time.Minute,
		"close connections idle this long (Kafka's connections.max.idle.ms), and those of a peer that stops reading its responses for this long")
	flag.DurationVar(&cfg.RequestTimeout, "request-timeout", 30*time.Second,
		"bound on one request, after which its unfinished partitions are answered COORDINATOR_NOT_AVAILABLE (Kafka's request.timeout.ms)")
	flag.IntVar(&cfg.MaxInFlightPerConnection, "max-in-flight-per-connection", 1024, "requests of one connection served at once")
	flag.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight")
	flag.DurationVar(&cfg.OperationTimeout, "operation-timeout", 15*time.Second,
		"bound on one request to the persister, retries and queueing included: every partition not done by then is answered COORDINATOR_NOT_AVAILABLE")
	flag.IntVar(&cfg.MaxPendingWrites, "max-pending-writes", 4096,
		"writes queued for one partition; beyond it a write is answered COORDINATOR_LOAD_IN_PROGRESS")
	flag.Int64Var(&cfg.MaxCacheBytes, "max-cache-bytes", persister.DefaultMaxCacheBytes,
		"memory the persister's cache of partition objects may take (estimated); beyond it idle partitions' objects are dropped "+
			"and read again on their next write. The default fits the chart's 512Mi memory limit")
	flag.Func("kube-api-qps", "client-side rate limit of the Kubernetes API requests of Writes, per second; 0 or below: none (default 200)",
		float32Flag(&cfg.WriteQPS))
	flag.IntVar(&cfg.WriteBurst, "kube-api-burst", 400, "burst of the Writes' client-side rate limit")
	flag.Func("kube-api-bulk-qps", "client-side rate limit of the Kubernetes API requests of Read, Initialize, Delete and ReadSummary, "+
		"per second, apart from the Writes' so that a bulk Read after a failover does not hold them up; 0 or below: none (default 100)",
		float32Flag(&cfg.BulkQPS))
	flag.IntVar(&cfg.BulkBurst, "kube-api-bulk-burst", 200, "burst of the bulk operations' client-side rate limit")
	f.zap.BindFlags(flag.CommandLine)
	flag.Parse() // controller-runtime's --kubeconfig is registered on the same flag set
	return f
}

func main() {
	f := parseFlags()
	if err := validateFlags(f.Config); err != nil {
		// One line per problem, no stack trace; exit status 2, as the flag package's for a bad flag.
		fmt.Fprintln(os.Stderr, "sharestate-sidecar: invalid flags:\n"+err.Error())
		os.Exit(2)
	}
	log := zap.New(zap.UseFlagOptions(&f.zap))
	ctrl.SetLogger(log)
	f.Logger = log

	ctx := ctrl.SetupSignalHandler()
	restCfg, err := kubeconfig.Load() // --kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharestate-sidecar:", err) // one line, not a logged stack trace
		os.Exit(1)
	}
	if f.Identity.PodUID == "" {
		log.Info("No pod UID (--pod-uid or POD_UID): a replacement pod of the same name will not be told apart from this one")
	}
	if err := sidecar.Run(ctx, restCfg, f.Config); err != nil {
		log.Error(err, "Sidecar stopped")
		os.Exit(1)
	}
}

// float32Flag parses a flag's value into v.
func float32Flag(v *float32) func(string) error {
	return func(s string) error {
		f, err := strconv.ParseFloat(s, 32)
		*v = float32(f)
		return err
	}
}
