package persister

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// Every state the persister writes carries the in-flight count of its batches, so that readers of
// the count (the operator) need not decode them; a reset counts none.
func TestWrittenStatesCountTheirInFlightRecords(t *testing.T) {
	obj := &sharestatev1.SharePartitionState{}
	setState(obj, sharestate.State{StateEpoch: 1, StartOffset: 10, Batches: []sharestate.StateBatch{
		{FirstOffset: 10, LastOffset: 14, DeliveryState: sharestate.DeliveryStateAvailable, DeliveryCount: 1},
		{FirstOffset: 15, LastOffset: 19, DeliveryState: sharestate.DeliveryStateAcknowledged, DeliveryCount: 1},
		{FirstOffset: 20, LastOffset: 20, DeliveryState: sharestate.DeliveryStateArchiving, DeliveryCount: 2},
		{FirstOffset: 21, LastOffset: 22, DeliveryState: sharestate.DeliveryStateArchived, DeliveryCount: 5},
	}})
	if n := obj.Status.InFlightRecords; n == nil || *n != 6 {
		t.Fatalf("in-flight count %v, want 6 (10-14 available, 20 archiving)", n)
	}
	resetState(obj, sharestate.State{StateEpoch: 2, StartOffset: 30}, metav1.Now())
	if n := obj.Status.InFlightRecords; n == nil || *n != 0 || len(obj.Status.StateBatches) != 0 {
		t.Fatalf("after a reset: in-flight count %v and %d batches, want 0 and none", n, len(obj.Status.StateBatches))
	}
}

// The persister writes the conditions that follow from what it stores (an initialized state, a new
// leader), the same the operator would set: the operator's status write is then skipped as
// unchanged, and does not move the object under the leader's next Write (which would conflict and
// cost a GET and a second update).
func TestWrittenStatesCarryTheOperatorsConditions(t *testing.T) {
	obj := &sharestatev1.SharePartitionState{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
	unchangedByTheOperator := func(step string) {
		t.Helper()
		observed := obj.DeepCopy()
		observed.SetObservedConditions()
		if !equality.Semantic.DeepEqual(observed.Status, obj.Status) {
			t.Fatalf("%s: the operator would still change the status:\nwritten  %+v\nobserved %+v", step, obj.Status.Conditions, observed.Status.Conditions)
		}
	}
	resetState(obj, sharestate.State{StateEpoch: 1, StartOffset: 0}, metav1.Now())
	unchangedByTheOperator("initialized")
	if !meta.IsStatusConditionTrue(obj.Status.Conditions, sharestatev1.ConditionInitialized) {
		t.Fatalf("initialized state without Initialized=True: %+v", obj.Status.Conditions)
	}

	recordLeader(obj, Identity{BrokerID: 1, PodName: "kafka-1", PodUID: "uid-1"}, 3, metav1.Now())
	unchangedByTheOperator("a leader's Read")
	if c := meta.FindStatusCondition(obj.Status.Conditions, sharestatev1.ConditionFenced); c == nil || c.Reason != sharestatev1.ReasonLeaderAlive {
		t.Fatalf("a leader recorded, Fenced %+v; want False, %s", c, sharestatev1.ReasonLeaderAlive)
	}

	// The operator fences (leader cleared, Fenced True); the new leader's Read turns Fenced False.
	obj.Status.Leader = nil
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{Type: sharestatev1.ConditionFenced, Status: metav1.ConditionTrue, Reason: "PodDeleted"})
	obj.Status.StateEpoch++
	recordLeader(obj, Identity{BrokerID: 2, PodName: "kafka-2", PodUID: "uid-2"}, 4, metav1.Now())
	unchangedByTheOperator("the new leader's Read after a fence")
	if meta.IsStatusConditionTrue(obj.Status.Conditions, sharestatev1.ConditionFenced) {
		t.Fatalf("a new leader recorded after a fence, still Fenced: %+v", obj.Status.Conditions)
	}
}
