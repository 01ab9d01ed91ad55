package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// The cache keeps no state batches and no managedFields, and the group aggregate counts the same
// in-flight records from the slimmed object as from the object the API server holds.
func TestSlimPartitionStateKeepsWhatTheOperatorReads(t *testing.T) {
	now := metav1.Now()
	leader := &sharestatev1.LeaderRef{BrokerID: 1, PodName: "kafka-0", PodUID: "u", LeaderEpoch: 3, Since: now}
	full := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "42", Generation: 2,
			Annotations:   map[string]string{"a": "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "sidecar", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: "q1Sh0o2QRbuBzMz8vEMbvQ", Partition: 7},
		Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 2, LeaderEpoch: 3, StartOffset: 10, DeliveryCompleteCount: 4,
			StateBatches: []sharestatev1.StateBatch{"10-14/0/1", "15/2/1", "16-17/3/1"}, Leader: leader, CreateTime: &now,
			Conditions: []metav1.Condition{{Type: sharestatev1.ConditionInitialized, Status: metav1.ConditionTrue}}},
	}
	want := inFlight(full)
	slimmed, err := SlimPartitionState(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	slim := slimmed.(*sharestatev1.SharePartitionState)
	if len(slim.Status.StateBatches) != 0 || slim.ManagedFields != nil {
		t.Fatalf("cached object keeps %d batches and %d managedFields entries", len(slim.Status.StateBatches), len(slim.ManagedFields))
	}
	if got := inFlight(slim); got != want || want != 7 {
		t.Fatalf("in-flight records %d from the cached object, %d from the stored one; want 7", got, want)
	}
	// Everything the reconcilers read is kept as it was.
	kept := full.DeepCopy()
	kept.ManagedFields, kept.Status.StateBatches = nil, nil
	kept.Annotations[cachedInFlightAnnotation] = "7"
	if !equality.Semantic.DeepEqual(kept, slim) {
		t.Fatalf("cached object %+v, want %+v", slim, kept)
	}

	corrupt := full.DeepCopy()
	corrupt.Status.StateBatches = []sharestatev1.StateBatch{"garbage"}
	slimmed, _ = SlimPartitionState(corrupt)
	if got := inFlight(slimmed.(*sharestatev1.SharePartitionState)); got != 0 {
		t.Fatalf("corrupt batches count %d in-flight records, want 0", got)
	}
	// An annotation of that name set by hand on a partition without batches is not taken for the count.
	forged := full.DeepCopy()
	forged.Status.StateBatches = nil
	forged.Annotations[cachedInFlightAnnotation] = "1000"
	slimmed, _ = SlimPartitionState(forged)
	if got := inFlight(slimmed.(*sharestatev1.SharePartitionState)); got != 0 {
		t.Fatalf("a partition without batches counts %d in-flight records, want 0", got)
	}
	if other, _ := SlimPartitionState("not a partition"); other != "not a partition" {
		t.Fatalf("another object was changed to %v", other)
	}
}
