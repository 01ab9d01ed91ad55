package bench

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

func partitionAt(name string, stateEpoch int32) *sharestatev1.SharePartitionState {
	p := &sharestatev1.SharePartitionState{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Status.StateEpoch = stateEpoch
	return p
}

// TestRaisedWatchFollowsOnlyItsPartitionsAboveTheirListedEpoch feeds a raisedWatch the events a
// watch of the victims' namespace brings: the load's writes to other partitions, a followed partition
// written at its listed epoch, its raise, the same raise seen again, a deletion. Only the first raise
// of each followed partition counts, and the watch is complete once each has been seen raised.
func TestRaisedWatchFollowsOnlyItsPartitionsAboveTheirListedEpoch(t *testing.T) {
	list := &sharestatev1.SharePartitionStateList{Items: []sharestatev1.SharePartitionState{
		*partitionAt("victim-a", 3), *partitionAt("victim-b", 7), *partitionAt("load-c", 3),
	}}
	w := newRaisedWatch(list, map[string]bool{"victim-a": true, "victim-b": true})
	if len(w.listed) != 2 || w.listed["victim-a"] != 3 || w.listed["victim-b"] != 7 {
		t.Fatalf("listed %v, want victim-a at 3 and victim-b at 7", w.listed)
	}
	steps := []struct {
		ev       watch.EventType
		obj      *sharestatev1.SharePartitionState
		raised   int
		complete bool
	}{
		{watch.Modified, partitionAt("load-c", 9), 0, false},   // not followed, whatever its epoch
		{watch.Modified, partitionAt("victim-a", 3), 0, false}, // written at its listed epoch: not raised
		{watch.Deleted, partitionAt("victim-b", 8), 0, false},  // a deletion is no raise
		{watch.Modified, partitionAt("victim-a", 4), 1, false},
		{watch.Modified, partitionAt("victim-a", 5), 1, false}, // seen raised already
		{watch.Modified, partitionAt("victim-b", 7), 1, false}, // its own listed epoch is 7, not 3
		{watch.Modified, partitionAt("victim-b", 8), 2, true},
	}
	for i, step := range steps {
		if got := w.note(step.ev, step.obj); got != step.complete || len(w.raised) != step.raised {
			t.Fatalf("step %d (%s %s at %d): complete %v with %d raised, want %v with %d",
				i, step.ev, step.obj.Name, step.obj.Status.StateEpoch, got, len(w.raised), step.complete, step.raised)
		}
	}
	if w.events != len(steps) {
		t.Errorf("counted %d events, want %d", w.events, len(steps))
	}
}
