package controllers

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// A reset pass that runs again (its completion was not recorded) initializes only the partitions it
// has not reset yet: an Initialize at the reset's epoch would write a fresh state over what a leader
// wrote since (semantics §5).
func TestPendingTargets(t *testing.T) {
	const group, topic = "orders", sharestatev1.TopicID("AAAAAAAAAAAAAAAAAAAAAQ")
	start := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	before, after := metav1.NewTime(start.Add(-time.Second)), metav1.NewTime(start.Add(time.Second))
	reset := &sharestatev1.OffsetResetStatus{ID: "r1", StateEpoch: 7, StartTime: &start}
	partition := func(p, epoch int32, created *metav1.Time) sharestatev1.SharePartitionState {
		var obj sharestatev1.SharePartitionState
		obj.Name = sharestatev1.SharePartitionStateName(group, string(topic), p)
		obj.Status.StateEpoch, obj.Status.CreateTime = epoch, created
		return obj
	}
	partitions := []sharestatev1.SharePartitionState{
		partition(0, 7, &after),  // reset by this reset, then written to: left alone
		partition(1, 7, &start),  // reset in the second the reset started: left alone
		partition(2, 6, &before), // not reached yet
		partition(3, 7, &before), // fenced up to the reset's epoch, never reset
		partition(4, 7, nil),     // an object without state
		// partition 5 has no object
	}
	var targets []sharestatev1.ResetTarget
	for p := range int32(6) {
		targets = append(targets, sharestatev1.ResetTarget{TopicID: topic, Partition: p, StartOffset: 10})
	}
	got := pendingTargets(group, targets, partitions, reset)
	var pending []int32
	for _, t := range got {
		pending = append(pending, t.Partition)
	}
	if want := []int32{2, 3, 4, 5}; !slices.Equal(pending, want) {
		t.Fatalf("pending partitions %v, want %v", pending, want)
	}
	if got[0].StartOffset != 10 || got[0].TopicID != topic {
		t.Fatalf("a pending target changed: %+v", got[0])
	}
}
