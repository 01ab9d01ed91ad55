package controllers

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
)

func TestJudgeLeader(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	leader := &sharestatev1.LeaderRef{BrokerID: 1, PodName: "kafka-1", PodUID: "uid-1", LeaderEpoch: 3}
	pod := func(mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "kafka-1", UID: types.UID("uid-1"), CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	notReadyFor := func(d time.Duration) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-d))}}
		}
	}
	deleting := metav1.NewTime(now)
	tests := []struct {
		name    string
		leader  *sharestatev1.LeaderRef
		pod     *corev1.Pod
		grace   time.Duration
		reason  string // empty: not stale
		recheck time.Duration
	}{
		{"no leader", nil, nil, 0, "", 0},
		{"leader without a pod name", &sharestatev1.LeaderRef{BrokerID: 1}, nil, 0, "", 0},
		{"live", leader, pod(nil), 0, "", 0},
		{"deleted", leader, nil, 0, sharestatev1.ReasonLeaderPodDeleted, 0},
		{"replaced", leader, pod(func(p *corev1.Pod) { p.UID = "uid-2" }), 0, sharestatev1.ReasonLeaderPodReplaced, 0},
		{"terminating", leader, pod(func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }), 0, sharestatev1.ReasonLeaderPodTerminating, 0},
		{"failed", leader, pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), 0, sharestatev1.ReasonLeaderPodFinished, 0},
		{"succeeded", leader, pod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), 0, sharestatev1.ReasonLeaderPodFinished, 0},
		{"not ready, check off", leader, pod(notReadyFor(time.Hour)), 0, "", 0},
		{"not ready within the grace", leader, pod(notReadyFor(10 * time.Second)), time.Minute, "", 50 * time.Second},
		{"not ready past the grace", leader, pod(notReadyFor(2 * time.Minute)), time.Minute, sharestatev1.ReasonLeaderPodNotReady, 0},
		{"no Ready condition counts from creation", leader, pod(func(p *corev1.Pod) { p.Status.Conditions = nil }), time.Minute, sharestatev1.ReasonLeaderPodNotReady, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := judgeLeader(tt.leader, tt.pod, now, tt.grace)
			if v.stale != (tt.reason != "") || v.reason != tt.reason || v.recheckAfter != tt.recheck {
				t.Fatalf("verdict %+v, want reason %q, recheck %v", v, tt.reason, tt.recheck)
			}
		})
	}
}

func TestFenceAndConditions(t *testing.T) {
	obj := &sharestatev1.SharePartitionState{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	now := metav1.Now()
	obj.Status = sharestatev1.SharePartitionStateStatus{StateEpoch: 4, CreateTime: &now, Leader: &sharestatev1.LeaderRef{BrokerID: 1, PodName: "kafka-1", LeaderEpoch: 2}}
	setObservedConditions(obj)
	if c := meta.FindStatusCondition(obj.Status.Conditions, sharestatev1.ConditionFenced); c.Status != metav1.ConditionFalse || c.Reason != sharestatev1.ReasonLeaderAlive {
		t.Fatalf("led partition: %+v", c)
	}
	fence(obj, leaderVerdict{stale: true, reason: sharestatev1.ReasonLeaderPodDeleted, message: "gone"})
	setObservedConditions(obj)
	if obj.Status.StateEpoch != 5 || obj.Status.Leader != nil || !partitionbook.IsFenced(obj) {
		t.Fatalf("after the fence: %+v", obj.Status)
	}
	if c := meta.FindStatusCondition(obj.Status.Conditions, sharestatev1.ConditionFenced); c.Reason != sharestatev1.ReasonLeaderPodDeleted {
		t.Fatalf("fence reason %+v", c)
	}
	// A new leader's Read clears it.
	obj.Status.Leader = &sharestatev1.LeaderRef{BrokerID: 2, PodName: "kafka-2", LeaderEpoch: 3}
	setObservedConditions(obj)
	if partitionbook.IsFenced(obj) {
		t.Fatal("still fenced after a new leader")
	}
	// A reset clears the leader without a fence: no leader, not fenced.
	obj.Status.Leader = nil
	setObservedConditions(obj)
	if c := meta.FindStatusCondition(obj.Status.Conditions, sharestatev1.ConditionFenced); partitionbook.IsFenced(obj) || c.Reason != sharestatev1.ReasonNoLeader {
		t.Fatalf("after a reset: %+v", c)
	}
	if !meta.IsStatusConditionTrue(obj.Status.Conditions, sharestatev1.ConditionInitialized) || obj.Status.ObservedGeneration != 1 {
		t.Fatalf("conditions %+v", obj.Status.Conditions)
	}
}

// TestPartitionsLedByAPodAreFencedGroupByGroup: the partitions a pod's death fences are taken in the
// order of group, topic and partition, whatever order the API server listed them in, so the workers
// finish one group's fences before they start the next group's.
func TestPartitionsLedByAPodAreFencedGroupByGroup(t *testing.T) {
	partition := func(group, topic string, p int32) sharestatev1.SharePartitionState {
		return sharestatev1.SharePartitionState{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: sharestatev1.SharePartitionStateName(group, topic, p)},
			Spec:       sharestatev1.SharePartitionStateSpec{GroupID: sharestatev1.GroupID(group), TopicID: sharestatev1.TopicID(topic), Partition: p},
		}
	}
	var want []sharestatev1.SharePartitionState
	for _, group := range []string{"billing", "orders", "payments"} {
		for _, topic := range []string{"AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBB"} {
			for p := range int32(12) { // 10 and 11 sort after 9, not after 1
				want = append(want, partition(group, topic, p))
			}
		}
	}
	shuffled := slices.Clone(want)
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })

	got := sortInGroupOrder(shuffled)
	if len(got) != len(want) {
		t.Fatalf("%d partitions sorted from %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Name != want[i].Name || got[i].Namespace != "ns" {
			t.Fatalf("partition %d is %s/%s, want %s/%s (%s, topic %s, partition %d)", i, got[i].Namespace, got[i].Name, "ns", want[i].Name,
				want[i].Spec.GroupID, want[i].Spec.TopicID, want[i].Spec.Partition)
		}
	}
}
