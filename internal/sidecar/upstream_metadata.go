package sidecar

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/metricsreg"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// In proxy mode the sidecar reads the upstream's metadata (a Kafka Metadata request for all topics,
// straight to the broker's real inter-broker listener) every period, for two things no share-state
// RPC tells it:
//
//   - whether its broker advertises the proxy for that listener (proxy_bypass.go): if not, the peers
//     reach the broker around the proxy, and the share state they send goes to Kafka's own persister;
//   - which topics no longer exist (topic_cleanup.go): Kafka's share coordinator removes a deleted
//     topic's state by itself, with no DeleteShareGroupState RPC, so the sidecar must.

// DefaultProxyMetadataInterval is how often the upstream's metadata is read: a misconfigured broker
// is reported within a minute.
const DefaultProxyMetadataInterval = 30 * time.Second

// metadataReadTimeout bounds one read: dial, ApiVersions and Metadata.
const metadataReadTimeout = 10 * time.Second

// The results of the metadata reads metric.
const (
	readComplete   = "complete"
	readIncomplete = "incomplete"
	readFailed     = "failed"
)

// metadataWatcher reads the upstream's metadata every interval and hands each answer to the bypass
// check and the deleted-topic cleanup.
type metadataWatcher struct {
	fetch    func(ctx context.Context) (*kafkawire.ClusterMetadata, error)
	interval time.Duration
	upstream string
	bypass   *bypassCheck
	cleanup  *topicCleanup
	reads    *prometheus.CounterVec
	log      logr.Logger

	failing bool // the last read failed: a new failure is not logged again
}

// newMetadataWatcher builds the watcher of proxy mode, nil outside it or with a zero interval.
func newMetadataWatcher(restCfg *rest.Config, cfg Config) (*metadataWatcher, error) {
	if !cfg.ProxyMode() || cfg.ProxyMetadataInterval <= 0 {
		return nil, nil
	}
	dial, err := cfg.ProxyTLS.upstreamDial(metadataReadTimeout)
	if err != nil {
		return nil, err
	}
	scheme := k8sruntime.NewScheme()
	if err := sharestatev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(restCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client of the deleted-topic cleanup: %w", err)
	}
	log := cfg.Logger.WithName("upstream-metadata")
	reads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_proxy_metadata_reads_total",
		Help: "Metadata reads from the proxy's upstream, by result: complete, incomplete (a topic with an error, or a suspicious answer), failed.",
	}, []string{"result"})
	if reads, err = metricsreg.Register(ctrlmetrics.Registry, reads); err != nil {
		return nil, err
	}
	bypass, err := newBypassCheck(restCfg, cfg, clientgoscheme.Scheme, log)
	if err != nil {
		return nil, err
	}
	cleanup, err := newTopicCleanup(c, cfg.Namespace, cfg.ProxyMetadataInterval, ctrlmetrics.Registry, log)
	if err != nil {
		return nil, err
	}
	opts := kafkawire.MetadataOptions{Address: cfg.ProxyUpstreamAddress, Dial: dial, ClientID: "sharestate-sidecar-metadata"}
	return &metadataWatcher{
		fetch: func(ctx context.Context) (*kafkawire.ClusterMetadata, error) {
			return kafkawire.FetchMetadata(ctx, opts)
		},
		interval: cfg.ProxyMetadataInterval, upstream: cfg.ProxyUpstreamAddress,
		bypass: bypass, cleanup: cleanup, reads: reads, log: log,
	}, nil
}

// run reads the metadata at once, then interval after each read ends, until ctx ends. Waiting after
// the read, not on a ticker, keeps two reads at least interval apart, which the cleanup relies on.
func (w *metadataWatcher) run(ctx context.Context, proxy net.Addr) {
	w.bypass.proxyPort = portOf(proxy)
	defer w.bypass.stop()
	for {
		w.round(ctx)
		if !sleep(ctx, w.interval) {
			return
		}
	}
}

// round lists the namespace's SharePartitionStates, then reads the metadata, and hands both on. The
// list comes first: an object in it existed before the read was sent.
func (w *metadataWatcher) round(ctx context.Context) {
	listed, listErr := w.cleanup.list(ctx)
	if listErr != nil {
		w.log.Info("Listing the SharePartitionStates failed; no deleted-topic cleanup this round", "error", listErr.Error())
	}
	sent := time.Now()
	readCtx, cancel := context.WithTimeout(ctx, metadataReadTimeout)
	md, err := w.fetch(readCtx)
	cancel()
	if err != nil {
		w.readFailed(ctx, err)
		return
	}
	if w.failing {
		w.log.Info("Reading the upstream's metadata succeeded again", "upstream", w.upstream)
	}
	w.failing = false
	w.bypass.observe(ctx, sent, md)
	read, err := newTopicsRead(sent, md, listed, listErr)
	if err != nil {
		w.reads.WithLabelValues(readIncomplete).Inc()
		w.log.Info("The upstream's metadata is not complete enough to tell deleted topics; no cleanup this round", "reason", err.Error())
		w.cleanup.forget()
		return
	}
	w.reads.WithLabelValues(readComplete).Inc()
	w.cleanup.observe(ctx, read, listed)
}

// readFailed counts a failed read, logs the first of a run of them (the broker is down, or still
// starting, for as long as it takes), and forgets the last read: the cleanup needs two in a row.
func (w *metadataWatcher) readFailed(ctx context.Context, err error) {
	w.reads.WithLabelValues(readFailed).Inc()
	w.cleanup.forget()
	if ctx.Err() != nil || w.failing {
		return
	}
	w.failing = true
	w.log.Info("Reading the upstream's metadata failed; retrying every interval", "upstream", w.upstream,
		"interval", w.interval, "error", err.Error())
}

// portOf is the port of a listener's address, 0 if it has none.
func portOf(addr net.Addr) int32 {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return int32(tcp.Port)
	}
	return 0
}
