package controllers

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
)

// fencesTotal counts the fences the operator made, by reason (a condition reason: a small fixed set).
var fencesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "sharestate_operator_fences_total",
	Help: "Share-partitions fenced by the operator (state epoch raised), by reason.",
}, []string{"reason"})

// fencesRefusedTotal counts the stale leaders the operator could not fence, by reason (a condition
// reason: today only StateEpochExhausted).
var fencesRefusedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "sharestate_operator_fences_refused_total",
	Help: "Stale share-partition leaders the operator could not fence, by reason (StateEpochExhausted: the state epoch is at its maximum).",
}, []string{"reason"})

// labelsRepairedTotal counts the leader-pod labels the operator set from a partition's status: an
// object from a persister that predates the label, a label patch the persister never made, a label
// changed or removed by hand. Above zero after the first resync of an upgrade, it should stay flat.
var labelsRepairedTotal = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "sharestate_operator_leader_labels_repaired_total",
	Help: "Leader-pod labels of SharePartitionStates the operator set from their status (missing, or not the recorded leader's pod).",
})

// resyncDuration times the periodic resync's passes over every partition.
var resyncDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
	Name:    "sharestate_operator_partition_resync_duration_seconds",
	Help:    "Time of one pass of the periodic resync over every SharePartitionState.",
	Buckets: prometheus.ExponentialBuckets(0.01, 4, 8),
})

func init() {
	ctrlmetrics.Registry.MustRegister(fencesTotal, fencesRefusedTotal, labelsRepairedTotal, resyncDuration)
}

// partitionsDesc is reported from the elected operator's last resync pass over every partition
// (the operator watches no partition, and a List of them all at every scrape would cost the API
// server more than the figures are worth); groupsDesc from the manager's cache of ShareGroups at
// scrape time.
var (
	partitionsDesc = prometheus.NewDesc("sharestate_partitions",
		"SharePartitionStates by condition: initialized, fenced, with_leader, and all of them (total), as of the last resync pass over every partition (--partition-resync-period).", []string{"state"}, nil)
	groupsDesc = prometheus.NewDesc("sharestate_groups",
		"ShareGroups by the status of their Ready condition.", []string{"ready"}, nil)
)

// countsOfLastPass holds the counts of the last complete resync pass; none before the first.
type countsOfLastPass struct {
	last atomic.Pointer[partitionbook.Counts]
}

func (c *countsOfLastPass) set(counts partitionbook.Counts) { c.last.Store(&counts) }

func (c *countsOfLastPass) get() (partitionbook.Counts, bool) {
	if p := c.last.Load(); p != nil {
		return *p, true
	}
	return partitionbook.Counts{}, false
}

// PartitionsCollector reports partitions and groups by condition. It is a manager Runnable only so
// that it is registered once the cache exists; it does nothing when run.
type PartitionsCollector struct {
	groups     client.Reader
	partitions *SharePartitionStateReconciler
}

// NewPartitionsCollector returns a collector that lists groups from groups (the manager's cache) and
// reports the partitions counted by the fencing reconciler's last resync pass.
func NewPartitionsCollector(groups client.Reader, partitions *SharePartitionStateReconciler) *PartitionsCollector {
	c := &PartitionsCollector{groups: groups, partitions: partitions}
	ctrlmetrics.Registry.Unregister(c)
	_ = ctrlmetrics.Registry.Register(c)
	return c
}

// Start implements manager.Runnable; collection happens at scrape time.
func (c *PartitionsCollector) Start(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Describe implements prometheus.Collector.
func (c *PartitionsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- partitionsDesc
	ch <- groupsDesc
}

// Collect implements prometheus.Collector.
func (c *PartitionsCollector) Collect(ch chan<- prometheus.Metric) {
	if counts, ok := c.partitions.counts.get(); ok {
		for state, n := range map[string]int{"total": counts.Total, "initialized": counts.Initialized,
			"fenced": counts.Fenced, "with_leader": counts.WithLeader} {
			ch <- prometheus.MustNewConstMetric(partitionsDesc, prometheus.GaugeValue, float64(n), state)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var groups sharestatev1.ShareGroupList
	if err := c.groups.List(ctx, &groups, client.UnsafeDisableDeepCopy); err == nil {
		counts := map[metav1.ConditionStatus]float64{metav1.ConditionTrue: 0, metav1.ConditionFalse: 0, metav1.ConditionUnknown: 0}
		for i := range groups.Items {
			status := metav1.ConditionUnknown
			if c := meta.FindStatusCondition(groups.Items[i].Status.Conditions, sharestatev1.ConditionReady); c != nil {
				status = c.Status
			}
			counts[status]++
		}
		for status, n := range counts {
			ch <- prometheus.MustNewConstMetric(groupsDesc, prometheus.GaugeValue, n, string(status))
		}
	}
}
