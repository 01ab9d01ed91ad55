package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
)

func TestAggregate(t *testing.T) {
	now := metav1.Now()
	sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	led := sharestatev1.SharePartitionState{Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 2, CreateTime: &now, DeliveryCompleteCount: 4,
		Leader: &sharestatev1.LeaderRef{PodName: "kafka-0"}, StateBatches: []sharestatev1.StateBatch{"10-14/0/1", "15/2/1", "16-17/3/1"}}}
	fenced := sharestatev1.SharePartitionState{Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 5, CreateTime: &now, DeliveryCompleteCount: -1,
		Conditions: []metav1.Condition{{Type: sharestatev1.ConditionFenced, Status: metav1.ConditionTrue, Reason: sharestatev1.ReasonLeaderPodDeleted}}}}
	uninitialized := sharestatev1.SharePartitionState{}
	s := aggregate(sg, summaries(led, fenced, uninitialized), sharestatev1.ShareGroupStatus{})
	if s.Partitions != 3 || s.InitializedPartitions != 2 || s.FencedPartitions != 1 || s.PartitionsWithLeader != 1 ||
		s.StateEpoch != 5 || s.InFlightRecords != 7 || s.DeliveryCompleteRecords != 4 || s.ObservedGeneration != 3 {
		t.Fatalf("status %+v", s)
	}
	if c := meta.FindStatusCondition(s.Conditions, sharestatev1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != sharestatev1.ReasonPartitionsFenced {
		t.Fatalf("Ready %+v", c)
	}
	ready := aggregate(sg, summaries(led), s)
	if c := meta.FindStatusCondition(ready.Conditions, sharestatev1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready %+v", c)
	}
	if c := meta.FindStatusCondition(ready.Conditions, sharestatev1.ConditionFenced); c.Status != metav1.ConditionFalse {
		t.Fatalf("Fenced %+v", c)
	}
}

// TestTotalsRefreshesAreSpreadOverThePeriod: 200 groups passed at the same instant (an operator's
// start) refresh their totals at slots spread evenly over the period, and each keeps its slot from
// one refresh to the next, a period later.
func TestTotalsRefreshesAreSpreadOverThePeriod(t *testing.T) {
	const period, groups = 30 * time.Second, 200
	start := time.Date(2026, 12, 1, 20, 0, 0, 123456789, time.UTC)
	clock := testingclock.NewFakePassiveClock(start)
	r := &ShareGroupReconciler{TotalsRefresh: period, Clock: clock}
	perSecond := make([]int, period/time.Second)
	for i := range groups {
		uid := types.UID(fmt.Sprintf("7f1c2a6e-0000-4000-8000-%012d", i))
		clock.SetTime(start)
		first := r.nextTotalsRefresh(uid)
		if first < period/2 || first >= period*3/2 {
			t.Fatalf("group %d: first refresh in %s, want within %s..%s", i, first, period/2, period*3/2)
		}
		perSecond[int(start.Add(first).Sub(start.Truncate(period))%period/time.Second)]++
		clock.SetTime(start.Add(first)) // the refresh, on time
		if next := r.nextTotalsRefresh(uid); next != period {
			t.Fatalf("group %d: refreshed at its slot, next refresh in %s, want a period (%s)", i, next, period)
		}
		clock.SetTime(start.Add(first + 40*time.Millisecond)) // the refresh, late
		if next := r.nextTotalsRefresh(uid); next != period-40*time.Millisecond {
			t.Fatalf("group %d: refreshed 40ms after its slot, next refresh in %s, want the next slot", i, next)
		}
	}
	// 6.7 groups a second on average; a second of 20 or more is a burst (Poisson: under 1e-4).
	for second, n := range perSecond {
		if n >= 20 {
			t.Fatalf("%d of %d groups refresh within second %d of the period, want them spread (%v)", n, groups, second, perSecond)
		}
	}
}

// TestTotalsRefreshAfterAnEarlyPass: a pass just before the group's slot (a partition changed) puts
// the refresh at the slot after, not at once.
func TestTotalsRefreshAfterAnEarlyPass(t *testing.T) {
	const period = 30 * time.Second
	now := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	clock := testingclock.NewFakePassiveClock(now)
	r := &ShareGroupReconciler{TotalsRefresh: period, Clock: clock}
	uid := types.UID("a8d3a0c4-5b7e-4c57-9e0b-5e1f3b2d7c10")
	slot := now.Add(r.nextTotalsRefresh(uid))
	for _, before := range []time.Duration{time.Second, period/2 - time.Millisecond} {
		clock.SetTime(slot.Add(-before))
		if next := r.nextTotalsRefresh(uid); next != before+period {
			t.Fatalf("pass %s before the slot: next refresh in %s, want %s (the slot after)", before, next, before+period)
		}
	}
	clock.SetTime(slot.Add(-period / 2))
	if next := r.nextTotalsRefresh(uid); next != period/2 {
		t.Fatalf("pass half a period before the slot: next refresh in %s, want %s (the slot)", next, period/2)
	}
}

// State of partitions the group no longer declares (its topic re-created under a new id, its
// partition count lowered) is read by nobody: the group is not Ready, and says which they are.
func TestAggregateFlagsUndeclaredPartitions(t *testing.T) {
	const topicA, topicB = sharestatev1.TopicID("q1Sh0o2QRbuBzMz8vEMbvQ"), sharestatev1.TopicID("AAAAAAAAAAAAAAAAAAAAAQ")
	now := metav1.Now()
	partition := func(topic sharestatev1.TopicID, p int32) sharestatev1.SharePartitionState {
		obj := sharestatev1.SharePartitionState{Spec: sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: topic, Partition: p},
			Status: sharestatev1.SharePartitionStateStatus{CreateTime: &now, Leader: &sharestatev1.LeaderRef{PodName: "kafka-0"}}}
		obj.Name = sharestatev1.SharePartitionStateName("g", string(topic), p)
		return obj
	}
	declaring := func(topics ...sharestatev1.ShareGroupTopic) *sharestatev1.ShareGroup {
		return &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Generation: 2}, Spec: sharestatev1.ShareGroupSpec{GroupID: "g", Topics: topics}}
	}
	partitions := []sharestatev1.SharePartitionState{partition(topicA, 0), partition(topicA, 2), partition(topicB, 0)}
	tests := []struct {
		name       string
		group      *sharestatev1.ShareGroup
		wantReason string
		wantIn     []string
	}{
		{"partition count lowered, topic re-created", declaring(sharestatev1.ShareGroupTopic{TopicID: topicA, Partitions: 1}),
			sharestatev1.ReasonUndeclaredPartitionStates,
			[]string{"2 SharePartitionStates", "topic " + string(topicA) + ", partition 2", "topic " + string(topicB) + ", partition 0", partitions[1].Name}},
		{"every partition declared", declaring(sharestatev1.ShareGroupTopic{TopicID: topicA, Partitions: 3}, sharestatev1.ShareGroupTopic{TopicID: topicB, Partitions: 1}),
			sharestatev1.ReasonAllPartitionsReady, nil},
		{"nothing declared: every partition is known", declaring(), sharestatev1.ReasonAllPartitionsReady, nil},
	}
	for _, tt := range tests {
		s := aggregate(tt.group, summaries(partitions...), sharestatev1.ShareGroupStatus{})
		c := meta.FindStatusCondition(s.Conditions, sharestatev1.ConditionReady)
		if c.Reason != tt.wantReason || (c.Status == metav1.ConditionTrue) != (tt.wantReason == sharestatev1.ReasonAllPartitionsReady) {
			t.Errorf("%s: Ready %+v, want reason %s", tt.name, c, tt.wantReason)
		}
		for _, w := range tt.wantIn {
			if !strings.Contains(c.Message, w) {
				t.Errorf("%s: Ready's message %q does not name %q", tt.name, c.Message, w)
			}
		}
	}
}

// summaries summarizes partitions as the partition book does.
func summaries(partitions ...sharestatev1.SharePartitionState) []partitionbook.Summary {
	out := make([]partitionbook.Summary, len(partitions))
	for i := range partitions {
		out[i] = partitionbook.SummaryOf(&partitions[i])
	}
	return out
}

// A young group whose partitions are not all there passes every newGroupPoll; a Ready one, or one past
// youngGroup, on its refresh period.
func TestNewGroupsPassOften(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	r := &ShareGroupReconciler{TotalsRefresh: 30 * time.Second, Clock: testingclock.NewFakePassiveClock(now)}
	group := func(age time.Duration, reason string) *sharestatev1.ShareGroup {
		sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{UID: "u", CreationTimestamp: metav1.NewTime(now.Add(-age))}}
		sg.Status.Conditions = []metav1.Condition{{Type: sharestatev1.ConditionReady, Reason: reason}}
		return sg
	}
	if got := r.nextPass(group(time.Minute, sharestatev1.ReasonNoPartitions)); got != newGroupPoll {
		t.Errorf("a young group without partitions passes in %v, want %v", got, newGroupPoll)
	}
	if got := r.nextPass(group(time.Minute, sharestatev1.ReasonPartitionsNotInitialized)); got != newGroupPoll {
		t.Errorf("a young group being initialized passes in %v, want %v", got, newGroupPoll)
	}
	for _, sg := range []*sharestatev1.ShareGroup{group(time.Minute, sharestatev1.ReasonAllPartitionsReady), group(time.Hour, sharestatev1.ReasonNoPartitions)} {
		if got := r.nextPass(sg); got < 15*time.Second {
			t.Errorf("a Ready or old group (%v) passes in %v, want its refresh", sg.Status.Conditions, got)
		}
	}
}
