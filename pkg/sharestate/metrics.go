package sharestate

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The persister's metrics, registered with controller-runtime's registry so they are served with the
// manager's (or the sidecar's) other metrics. Every label has a small, fixed set of values.
var (
	operationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_persister_operations_total",
		Help: "Per-partition persister operations, by operation and result (a Kafka error code name).",
	}, []string{"operation", "result"})

	writeDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sharestate_persister_write_duration_seconds",
		Help:    "Time from a partition's Write being queued to its answer.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	})

	apiRequestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_persister_api_requests_total",
		Help: "Requests the persister made to the Kubernetes API, by verb and outcome.",
	}, []string{"verb", "outcome"})

	conflictsTotal = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sharestate_persister_conflicts_total",
		Help: "Status updates refused because the object had changed (or gone) since it was read.",
	})

	writesPerUpdate = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sharestate_persister_writes_per_update",
		Help:    "Writes of one partition combined into one status update (group commit).",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})

	statusBytes = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sharestate_persister_status_bytes",
		Help:    "Estimated size of the status stored by each update.",
		Buckets: prometheus.ExponentialBuckets(512, 2, 12),
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(operationsTotal, writeDuration, apiRequestsTotal, conflictsTotal, writesPerUpdate, statusBytes)
}

// persisterMetrics is the persister's handle on the metrics (one set per process).
type persisterMetrics struct {
	conflicts   prometheus.Counter
	statusBytes prometheus.Observer
}

func newPersisterMetrics() *persisterMetrics {
	return &persisterMetrics{conflicts: conflictsTotal, statusBytes: statusBytes}
}

func (m *persisterMetrics) apiRequest(verb string, err error) {
	outcome := "success"
	switch classify(err) {
	case classOK:
	case classConflict:
		outcome = "conflict"
	case classNotFound:
		outcome = "not_found"
	case classExists:
		outcome = "already_exists"
	case classRetriable:
		outcome = "unavailable"
	default:
		outcome = "refused"
	}
	apiRequestsTotal.WithLabelValues(verb, outcome).Inc()
}

func (m *persisterMetrics) operation(op string, code ErrorCode) {
	operationsTotal.WithLabelValues(op, code.String()).Inc()
}
