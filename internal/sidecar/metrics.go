package sidecar

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// The sidecar's metrics, registered with controller-runtime's registry beside the persister's. Every
// label has a small, fixed set of values: Kafka's API names, error code names, close reasons.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_sidecar_requests_total",
		Help: "Kafka-protocol requests, by API and outcome: NONE, the first error a partition was answered with, " +
			"or the error a refused request was closed with (UNSUPPORTED_VERSION, INVALID_REQUEST).",
	}, []string{"api", "error"})

	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sharestate_sidecar_request_duration_seconds",
		Help:    "Time from a request's arrival to its response being ready, by API (not counting the wait for earlier responses on its connection).",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18),
	}, []string{"api"})

	connectionsOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sharestate_sidecar_connections",
		Help: "Open Kafka-protocol connections.",
	})

	connectionsAccepted = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sharestate_sidecar_connections_accepted_total",
		Help: "Kafka-protocol connections accepted.",
	})

	connectionsClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_sidecar_connections_closed_total",
		Help: "Kafka-protocol connections closed, by reason.",
	}, []string{"reason"})

	requestsInFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sharestate_sidecar_requests_in_flight",
		Help: "Requests read and not yet answered, over all connections.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(requestsTotal, requestDuration, connectionsOpen, connectionsAccepted, connectionsClosed, requestsInFlight)
}

func countRequest(api string, code sharestate.ErrorCode) {
	requestsTotal.WithLabelValues(api, code.String()).Inc()
}
