package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sharestate/sharestate-operator/internal/metricsreg"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// A broker's peers, and its own persister, reach it at the address it advertises for its
// inter-broker listener: Kafka's share coordinator lookup and FindCoordinator both answer it
// (docs/kafka-integration.md §2). A Metadata request on a listener lists every live broker's address
// for that listener (KafkaApis.handleTopicMetadataRequest: getAliveBrokerNodes(listenerName)), so the
// upstream's answer shows what this broker advertises for its inter-broker listener. Only the port
// is compared: the host may be a DNS name the sidecar cannot tell from its own.

// ReasonProxyBypassed is the reason of the Warning event on the sidecar's pod when its broker
// advertises another port than the proxy's for its inter-broker listener.
const ReasonProxyBypassed = "ProxyBypassed"

// bypassReportInterval is how often a bypass that lasts is logged and evented again.
const bypassReportInterval = 5 * time.Minute

// advertisedVerdict says what the metadata shows of this broker's advertised inter-broker address.
type advertisedVerdict int

const (
	// advertisedUnknown: the broker is not in the answer (not registered, or fenced, yet).
	advertisedUnknown advertisedVerdict = iota
	// advertisedProxy: the broker advertises the proxy's port.
	advertisedProxy
	// advertisedBypass: the broker advertises another port; peers reach it around the proxy.
	advertisedBypass
)

// checkAdvertised finds brokerID in md and compares the port it advertises with the proxy's.
func checkAdvertised(md *kafkawire.ClusterMetadata, brokerID, proxyPort int32) (advertisedVerdict, kafkawire.BrokerAddress) {
	for _, b := range md.Brokers {
		if b.NodeID != brokerID {
			continue
		}
		if b.Port == proxyPort {
			return advertisedProxy, b
		}
		return advertisedBypass, b
	}
	return advertisedUnknown, kafkawire.BrokerAddress{}
}

// bypassCheck reports a broker that advertises another port than the proxy's: an error log line and
// a Warning event on the pod, at once and every bypassReportInterval while it lasts, and the
// sharestate_proxy_bypassed gauge. It never touches readiness: taking the broker out of service
// would not route its peers through the proxy.
type bypassCheck struct {
	brokerID  int32
	proxyPort int32 // set when the proxy listens
	upstream  string
	pod       *corev1.Pod // what the events regard
	gauge     prometheus.Gauge
	recorder  events.EventRecorder
	stop      func()
	log       logr.Logger

	bypassed     bool
	lastReported time.Time
}

func newBypassCheck(restCfg *rest.Config, cfg Config, scheme *k8sruntime.Scheme, log logr.Logger) (*bypassCheck, error) {
	gauge, err := metricsreg.Register(ctrlmetrics.Registry, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sharestate_proxy_bypassed",
		Help: "1 while the upstream's metadata shows the broker advertising another port than the proxy's for its inter-broker listener, else 0.",
	}))
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("creating the Kubernetes client of the proxy's events: %w", err)
	}
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	stopCh := make(chan struct{})
	broadcaster.StartRecordingToSink(stopCh)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Identity.PodName, UID: types.UID(cfg.Identity.PodUID)}}
	return &bypassCheck{
		brokerID: cfg.Identity.BrokerID, upstream: cfg.ProxyUpstreamAddress, pod: pod, gauge: gauge,
		recorder: broadcaster.NewRecorder(scheme, "sharestate-sidecar"),
		stop:     func() { close(stopCh); broadcaster.Shutdown() },
		log:      log.WithValues("brokerId", cfg.Identity.BrokerID),
	}, nil
}

// observe judges one metadata answer, read at now.
func (b *bypassCheck) observe(_ context.Context, now time.Time, md *kafkawire.ClusterMetadata) {
	verdict, advertised := checkAdvertised(md, b.brokerID, b.proxyPort)
	switch verdict {
	case advertisedUnknown:
		b.log.V(1).Info("The upstream's metadata does not list this broker yet; its advertised address is not checked")
	case advertisedProxy:
		if b.bypassed {
			b.log.Info("The broker advertises the proxy for its inter-broker listener again",
				"advertised", net.JoinHostPort(advertised.Host, strconv.Itoa(int(advertised.Port))))
		}
		b.bypassed = false
		b.gauge.Set(0)
	case advertisedBypass:
		b.gauge.Set(1)
		if !b.bypassed || now.Sub(b.lastReported) >= bypassReportInterval {
			b.report(advertised)
			b.lastReported = now
		}
		b.bypassed = true
	}
}

// report logs and events a bypass, naming both addresses and what to fix.
func (b *bypassCheck) report(advertised kafkawire.BrokerAddress) {
	addr := net.JoinHostPort(advertised.Host, strconv.Itoa(int(advertised.Port)))
	_, upstreamPort, _ := net.SplitHostPort(b.upstream)
	b.log.Error(errProxyBypassed, "The broker advertises another port than the proxy's for its inter-broker listener, so its peers' "+
		"share-state requests go around the proxy to Kafka's own persister; set advertised.listeners for that listener to the proxy's address",
		"advertised", addr, "proxyPort", b.proxyPort, "upstream", b.upstream,
		"advertisesUpstream", upstreamPort == strconv.Itoa(int(advertised.Port)))
	b.recorder.Eventf(b.pod, nil, corev1.EventTypeWarning, ReasonProxyBypassed, "CheckAdvertisedListener",
		"Broker %d advertises %s for its inter-broker listener, not the proxy's port %d: its peers' share-state requests go "+
			"around the proxy, to Kafka's own persister, and are not kept in SharePartitionStates. Set advertised.listeners "+
			"for the inter-broker listener to the proxy's address (the sidecar's --proxy-listen-address).",
		b.brokerID, addr, b.proxyPort)
}

// errProxyBypassed is the error of the bypass's log line.
var errProxyBypassed = errors.New("the broker is advertised around the proxy")
