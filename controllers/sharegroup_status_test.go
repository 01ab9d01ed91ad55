package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

func TestAggregate(t *testing.T) {
	now := metav1.Now()
	sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	led := sharestatev1.SharePartitionState{Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 2, CreateTime: &now, DeliveryCompleteCount: 4,
		Leader: &sharestatev1.LeaderRef{PodName: "kafka-0"}, StateBatches: []sharestatev1.StateBatch{"10-14/0/1", "15/2/1", "16-17/3/1"}}}
	fenced := sharestatev1.SharePartitionState{Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 5, CreateTime: &now, DeliveryCompleteCount: -1,
		Conditions: []metav1.Condition{{Type: sharestatev1.ConditionFenced, Status: metav1.ConditionTrue, Reason: sharestatev1.ReasonLeaderPodDeleted}}}}
	uninitialized := sharestatev1.SharePartitionState{}
	s := aggregate(sg, []sharestatev1.SharePartitionState{led, fenced, uninitialized}, sharestatev1.ShareGroupStatus{})
	if s.Partitions != 3 || s.InitializedPartitions != 2 || s.FencedPartitions != 1 || s.PartitionsWithLeader != 1 ||
		s.StateEpoch != 5 || s.InFlightRecords != 7 || s.DeliveryCompleteRecords != 4 || s.ObservedGeneration != 3 {
		t.Fatalf("status %+v", s)
	}
	if c := meta.FindStatusCondition(s.Conditions, sharestatev1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != sharestatev1.ReasonPartitionsFenced {
		t.Fatalf("Ready %+v", c)
	}
	ready := aggregate(sg, []sharestatev1.SharePartitionState{led}, s)
	if c := meta.FindStatusCondition(ready.Conditions, sharestatev1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready %+v", c)
	}
	if c := meta.FindStatusCondition(ready.Conditions, sharestatev1.ConditionFenced); c.Status != metav1.ConditionFalse {
		t.Fatalf("Fenced %+v", c)
	}
}

// TestTotalsRefreshIsSpread: each pass's next refresh falls within ±10 % of the period, and not
// always on the same instant, so groups started together drift apart.
func TestTotalsRefreshIsSpread(t *testing.T) {
	r := &ShareGroupReconciler{TotalsRefresh: 30 * time.Second}
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := r.nextTotalsRefresh()
		if d < 27*time.Second || d >= 33*time.Second {
			t.Fatalf("next refresh in %s, want within 27s..33s", d)
		}
		seen[d] = true
	}
	lowest, highest := 33*time.Second, time.Duration(0)
	for d := range seen {
		lowest, highest = min(lowest, d), max(highest, d)
	}
	// Uniform over 27s..33s, a thousand draws all miss the half second at either end with a
	// probability of 1e-38.
	if lowest > 27500*time.Millisecond || highest < 32500*time.Millisecond {
		t.Fatalf("1000 refreshes spread over %s..%s only, want 27s..33s", lowest, highest)
	}
	if len(seen) < 500 {
		t.Fatalf("only %d different delays in 1000 passes", len(seen))
	}
}
