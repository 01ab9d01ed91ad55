package prommetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sharestate/sharestate-operator/internal/metricsreg"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire/serve"
)

// serverMetrics keeps a share-state server's observations as metrics (the sidecar registers them on
// controller-runtime's registry, beside the persister's). Every label has a small, fixed set of
// values: Kafka's API names, error code names, close reasons.
type serverMetrics struct {
	requestsTotal       *prometheus.CounterVec
	requestDuration     *prometheus.HistogramVec
	connectionsOpen     prometheus.Gauge
	connectionsAccepted prometheus.Counter
	connectionsClosed   *prometheus.CounterVec
	requestsInFlight    prometheus.Gauge
}

var _ serve.ServerObserver = (*serverMetrics)(nil)

// NewServerObserver returns a share-state server's observer whose metrics are registered on reg.
// A proxy's ServerObserver is one too: the requests it answers itself count as the server's do.
func NewServerObserver(reg prometheus.Registerer) (serve.ServerObserver, error) {
	m := &serverMetrics{
		requestsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharestate_sidecar_requests_total",
			Help: "Kafka-protocol requests, by API and outcome: NONE, the first error a partition was answered with, " +
				"or the error a refused request was closed with (UNSUPPORTED_VERSION, INVALID_REQUEST).",
		}, []string{"api", "error"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sharestate_sidecar_request_duration_seconds",
			Help:    "Time from a request's arrival to its response being ready, by API (not counting the wait for earlier responses on its connection).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
		}, []string{"api"}),
		connectionsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sharestate_sidecar_connections",
			Help: "Open Kafka-protocol connections.",
		}),
		connectionsAccepted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sharestate_sidecar_connections_accepted_total",
			Help: "Kafka-protocol connections accepted.",
		}),
		connectionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharestate_sidecar_connections_closed_total",
			Help: "Kafka-protocol connections closed, by reason.",
		}, []string{"reason"}),
		requestsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sharestate_sidecar_requests_in_flight",
			Help: "Requests read and not yet answered, over all connections.",
		}),
	}
	var err error
	metricsreg.Into(reg, &err, &m.requestsTotal)
	metricsreg.Into(reg, &err, &m.requestDuration)
	metricsreg.Into(reg, &err, &m.connectionsOpen)
	metricsreg.Into(reg, &err, &m.connectionsAccepted)
	metricsreg.Into(reg, &err, &m.connectionsClosed)
	metricsreg.Into(reg, &err, &m.requestsInFlight)
	return m, err
}

func (m *serverMetrics) ConnectionOpened() {
	m.connectionsAccepted.Inc()
	m.connectionsOpen.Inc()
}

func (m *serverMetrics) ConnectionClosed(reason string) {
	m.connectionsOpen.Dec()
	m.connectionsClosed.WithLabelValues(reason).Inc()
}

func (m *serverMetrics) RequestRead()    { m.requestsInFlight.Inc() }
func (m *serverMetrics) RequestWritten() { m.requestsInFlight.Dec() }

func (m *serverMetrics) RequestCounted(api string, code sharestate.ErrorCode) {
	m.requestsTotal.WithLabelValues(api, code.String()).Inc()
}

func (m *serverMetrics) RequestServed(api string, took time.Duration) {
	m.requestDuration.WithLabelValues(api).Observe(took.Seconds())
}
