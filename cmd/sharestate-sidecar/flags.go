package main

import (
	"flag"
	"os"
	"strconv"
	"time"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharestate/sharestate-operator/internal/sidecar"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// flags are the command line: the sidecar's configuration and the Kubernetes client's.
type flags struct {
	sidecar.Config
	zap zap.Options
	// brokerIDSet says whether --broker-id was given: it has no default, since 0 is a broker id too.
	brokerIDSet bool
}

// bindFlags registers the sidecar's flags on fs and returns what they parse into. main binds them
// on the command line's flag set, where controller-runtime registers --kubeconfig.
func bindFlags(fs *flag.FlagSet) *flags {
	f := &flags{}
	bindEndpointFlags(fs, f)
	bindProxyFlags(fs, &f.Config)
	bindLimitFlags(fs, &f.Config)
	f.zap.EncoderConfigOptions = append(f.zap.EncoderConfigOptions, stringDurations)
	f.zap.BindFlags(fs)
	return f
}

// stringDurations logs a duration as Go writes it ("30s"), not as zap's production default, a bare
// number of seconds that does not say its unit.
func stringDurations(c *zapcore.EncoderConfig) { c.EncodeDuration = zapcore.StringDurationEncoder }

// bindEndpointFlags registers the direct listener's, the HTTP endpoints' and the broker identity's
// flags.
func bindEndpointFlags(fs *flag.FlagSet, f *flags) {
	cfg := &f.Config
	fs.StringVar(&cfg.ListenAddress, "listen-address", kafkawire.DefaultAddress,
		"address of the Kafka-protocol listener (loopback: the broker in the same pod is its only client)")
	fs.StringVar(&cfg.HealthProbeBindAddress, "health-probe-bind-address", sidecar.DefaultHealthProbeBindAddress,
		"address of /healthz and /readyz, plain HTTP for the kubelet's probes; 0 disables them")
	fs.StringVar(&cfg.PprofBindAddress, "pprof-bind-address", "0",
		"address of Go's /debug/pprof profiles, unauthenticated (bind it to loopback, e.g. 127.0.0.1:6060); 0 disables them")
	fs.StringVar(&cfg.MetricsBindAddress, "metrics-bind-address", "",
		`address of /metrics; 0 disables it (default "`+sidecar.DefaultSecureMetricsAddress+`", or "`+
			sidecar.DefaultPlainMetricsAddress+`" with --metrics-secure=false)`)
	fs.BoolVar(&cfg.SecureMetrics, "metrics-secure", true,
		"serve /metrics over HTTPS, to scrapers whose token and access to /metrics the API server accepts (the service account "+
			"needs to create tokenreviews and subjectaccessreviews); false: plain HTTP, on a loopback address only")
	fs.StringVar(&cfg.MetricsCertDir, "metrics-cert-dir", "",
		"directory of tls.crt and tls.key for /metrics over HTTPS (default: a self-signed certificate)")
	fs.StringVar(&cfg.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the share-state resources (default: $POD_NAMESPACE)")
	fs.Func("broker-id", "the Kafka broker id (node.id) of the broker this sidecar serves (required)", func(v string) error {
		id, err := strconv.ParseInt(v, 10, 32)
		cfg.Identity.BrokerID, f.brokerIDSet = int32(id), true
		return err
	})
	fs.StringVar(&cfg.Identity.PodName, "pod-name", os.Getenv("POD_NAME"), "name of the broker's pod, recorded as the leader (default: $POD_NAME)")
	fs.StringVar(&cfg.Identity.PodUID, "pod-uid", os.Getenv("POD_UID"), "UID of the broker's pod, recorded as the leader (default: $POD_UID)")
}

// bindProxyFlags registers proxy mode's flags.
func bindProxyFlags(fs *flag.FlagSet, cfg *sidecar.Config) {
	fs.StringVar(&cfg.ProxyListenAddress, "proxy-listen-address", "",
		"address of the Kafka-protocol proxy, the one the broker's advertised.listeners names for its inter-broker listener; "+
			"with --proxy-upstream-address it turns proxy mode on (default: off)")
	fs.StringVar(&cfg.ProxyUpstreamAddress, "proxy-upstream-address", "",
		"the broker's real inter-broker listener (on loopback), to which the proxy forwards every request but the share-state ones (API keys 83-87)")
	fs.BoolVar(&cfg.ProxyRequireAuthentication, "proxy-require-authentication", false,
		"answer the share-state requests (API keys 83-87) only on proxied connections whose SASL authentication the upstream accepted; "+
			"set it when the upstream listener is SASL, or the proxy answers clients the broker would refuse")
	fs.StringVar(&cfg.ProxyTLS.CertFile, "proxy-tls-cert-file", "", "PEM certificate the proxy's listener serves TLS with, read again when it changes (default: plain TCP)")
	fs.StringVar(&cfg.ProxyTLS.KeyFile, "proxy-tls-key-file", "", "PEM key of --proxy-tls-cert-file")
	fs.StringVar(&cfg.ProxyTLS.ClientCAFile, "proxy-tls-client-ca-file", "",
		"PEM CA certificates: the proxy's clients must present a certificate they signed (a verified client counts as authenticated)")
	fs.BoolVar(&cfg.ProxyTLS.Upstream, "proxy-upstream-tls", false, "speak TLS to the upstream")
	fs.StringVar(&cfg.ProxyTLS.UpstreamCAFile, "proxy-upstream-tls-ca-file", "", "PEM CA certificates the upstream's certificate is verified with (default: the system's)")
	fs.StringVar(&cfg.ProxyTLS.UpstreamServerName, "proxy-upstream-tls-server-name", "", "name the upstream's certificate is verified for (default: the upstream address's host)")
	fs.DurationVar(&cfg.ProxyMetadataInterval, "proxy-metadata-interval", sidecar.DefaultProxyMetadataInterval,
		"in proxy mode, how often the upstream's metadata is read: to report (log, event, metric) a broker that advertises another "+
			"port than the proxy's for its inter-broker listener, and to delete the SharePartitionStates of deleted topics; 0 disables both")
}

// bindLimitFlags registers the bounds on requests, connections, the persister and its Kubernetes
// API clients.
func bindLimitFlags(fs *flag.FlagSet, cfg *sidecar.Config) {
	cfg.MaxRequestBytes = kafkawire.DefaultMaxRequestBytes
	fs.Func("max-request-bytes", "largest request accepted; a larger one closes its connection (default 8388608, 8 MiB: "+
		"a partition's largest Write, 2000 state batches of 20 bytes, is 40 KB, so this holds over 200 of them in one request)",
		func(v string) error {
			n, err := strconv.ParseInt(v, 10, 32)
			cfg.MaxRequestBytes = int32(n)
			return err
		})
	fs.Int64Var(&cfg.MaxQueuedRequestBytes, "max-queued-request-bytes", 4*kafkawire.DefaultMaxRequestBytes,
		"request bytes held at once over all connections, from a request's size field until its answer; beyond it, reading waits "+
			"(Kafka's queued.max.request.bytes; at least --max-request-bytes)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 10*time.Minute,
		"close connections idle this long (Kafka's connections.max.idle.ms), and those of a peer that stops reading its responses for this long")
	fs.DurationVar(&cfg.RequestTimeout, "request-timeout", 30*time.Second,
		"bound on one request, after which its unfinished partitions are answered COORDINATOR_NOT_AVAILABLE (Kafka's request.timeout.ms)")
	fs.IntVar(&cfg.MaxInFlightPerConnection, "max-in-flight-per-connection", 1024, "requests of one connection served at once")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long SIGTERM waits for requests in flight")
	fs.DurationVar(&cfg.OperationTimeout, "operation-timeout", 15*time.Second,
		"bound on one request to the persister, retries and queueing included: every partition not done by then is answered COORDINATOR_NOT_AVAILABLE")
	fs.IntVar(&cfg.MaxPendingWrites, "max-pending-writes", 4096,
		"writes queued for one partition; beyond it a write is answered COORDINATOR_LOAD_IN_PROGRESS")
	fs.Int64Var(&cfg.MaxCacheBytes, "max-cache-bytes", persister.DefaultMaxCacheBytes,
		"memory the persister's cache of partition objects may take (estimated); beyond it idle partitions' objects are dropped "+
			"and read again on their next write. The default fits the chart's 512Mi memory limit")
	cfg.WriteQPS, cfg.BulkQPS = 200, 100
	fs.Func("kube-api-qps", "client-side rate limit of the Kubernetes API requests of Writes, per second; 0 or below: none (default 200)",
		float32Flag(&cfg.WriteQPS))
	fs.IntVar(&cfg.WriteBurst, "kube-api-burst", 400, "burst of the Writes' client-side rate limit")
	fs.Func("kube-api-bulk-qps", "client-side rate limit of the Kubernetes API requests of Read, Initialize, Delete and ReadSummary, "+
		"per second, apart from the Writes' so that a bulk Read after a failover does not hold them up; 0 or below: none (default 100)",
		float32Flag(&cfg.BulkQPS))
	fs.IntVar(&cfg.BulkBurst, "kube-api-bulk-burst", 200, "burst of the bulk operations' client-side rate limit")
}

// float32Flag parses a flag's value into v.
func float32Flag(v *float32) func(string) error {
	return func(s string) error {
		f, err := strconv.ParseFloat(s, 32)
		*v = float32(f)
		return err
	}
}
