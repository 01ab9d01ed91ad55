package persister

import (
	"testing"

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
