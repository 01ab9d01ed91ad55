package kafkawire

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sharestate/sharestate-operator/internal/metricsreg"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// serverMetrics are a Server's metrics, registered on the Registerer of its options (the sidecar
// passes controller-runtime's, so they are served beside the persister's). Every label has a small,
// fixed set of values: Kafka's API names, error code names, close reasons.
type serverMetrics struct {
	requestsTotal       *prometheus.CounterVec
	requestDuration     *prometheus.HistogramVec
	connectionsOpen     prometheus.Gauge
	connectionsAccepted prometheus.Counter
	connectionsClosed   *prometheus.CounterVec
	requestsInFlight    prometheus.Gauge
}

// newServerMetrics makes a server's metrics and registers them on reg (none: nil).
func newServerMetrics(reg prometheus.Registerer) (*serverMetrics, error) {
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

func (m *serverMetrics) countRequest(api string, code sharestate.ErrorCode) {
	m.requestsTotal.WithLabelValues(api, code.String()).Inc()
}
