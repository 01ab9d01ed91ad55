package prommetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sharestate/sharestate-operator/internal/metricsreg"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// persisterMetrics keeps a persister's observations as metrics. Every label has a small, fixed set
// of values.
type persisterMetrics struct {
	operations      *prometheus.CounterVec
	writeDuration   prometheus.Histogram
	updateDuration  prometheus.Histogram
	apiRequests     *prometheus.CounterVec
	conflicts       prometheus.Counter
	writesPerUpdate prometheus.Histogram
	statusBytes     prometheus.Histogram
}

var _ persister.Observer = (*persisterMetrics)(nil)

// NewPersisterObserver returns a persister's observer whose metrics are registered on reg.
func NewPersisterObserver(reg prometheus.Registerer) (persister.Observer, error) {
	m := &persisterMetrics{
		operations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharestate_persister_operations_total",
			Help: "Per-partition persister operations, by operation and result (a Kafka error code name).",
		}, []string{"operation", "result"}),
		writeDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sharestate_persister_write_duration_seconds",
			Help:    "Time from a partition's Write being queued to its answer.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		updateDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sharestate_persister_status_update_duration_seconds",
			Help: "Time of one status update as the persister sees it: encoding, the round trip to the " +
				"API server and decoding the answer. A Write's time less this is its wait behind the update in flight.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharestate_persister_api_requests_total",
			Help: "Requests the persister made to the Kubernetes API, by verb and outcome.",
		}, []string{"verb", "outcome"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sharestate_persister_conflicts_total",
			Help: "Status updates refused because the object had changed (or gone) since it was read.",
		}),
		writesPerUpdate: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sharestate_persister_writes_per_update",
			Help:    "Writes of one partition combined into one status update (group commit).",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
		}),
		statusBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "sharestate_persister_status_bytes",
			Help:    "Estimated size of the status stored by each update.",
			Buckets: prometheus.ExponentialBuckets(512, 2, 12),
		}),
	}
	var err error
	metricsreg.Into(reg, &err, &m.operations)
	metricsreg.Into(reg, &err, &m.writeDuration)
	metricsreg.Into(reg, &err, &m.updateDuration)
	metricsreg.Into(reg, &err, &m.apiRequests)
	metricsreg.Into(reg, &err, &m.conflicts)
	metricsreg.Into(reg, &err, &m.writesPerUpdate)
	metricsreg.Into(reg, &err, &m.statusBytes)
	return m, err
}

func (m *persisterMetrics) Operation(op string, code sharestate.ErrorCode) {
	m.operations.WithLabelValues(op, code.String()).Inc()
}
func (m *persisterMetrics) WriteAnswered(took time.Duration) { m.writeDuration.Observe(took.Seconds()) }
func (m *persisterMetrics) StatusUpdated(took time.Duration) {
	m.updateDuration.Observe(took.Seconds())
}
func (m *persisterMetrics) StatusStored(bytes int) { m.statusBytes.Observe(float64(bytes)) }
func (m *persisterMetrics) WritesCombined(n int)   { m.writesPerUpdate.Observe(float64(n)) }
func (m *persisterMetrics) APIRequest(verb, outcome string) {
	m.apiRequests.WithLabelValues(verb, outcome).Inc()
}
func (m *persisterMetrics) Conflict() { m.conflicts.Inc() }
