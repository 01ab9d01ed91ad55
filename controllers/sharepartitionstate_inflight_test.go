package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// A group's partitions are kept without their state batches and managedFields, and its aggregate
// counts the same in-flight records from them as from the objects the API server holds.
func TestWithoutStateBatchesKeepsWhatTheGroupReads(t *testing.T) {
	now := metav1.Now()
	full := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "42",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "sidecar", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: "q1Sh0o2QRbuBzMz8vEMbvQ", Partition: 7},
		Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 2, LeaderEpoch: 3, StartOffset: 10, DeliveryCompleteCount: 4,
			StateBatches: []sharestatev1.StateBatch{"10-14/0/1", "15/2/1", "16-17/3/1"}, CreateTime: &now,
			Leader: &sharestatev1.LeaderRef{BrokerID: 1, PodName: "kafka-0", PodUID: "u", LeaderEpoch: 3, Since: now}},
	}
	want := inFlight(full)
	slim := full.DeepCopy()
	withoutStateBatches(slim)
	if got := inFlight(slim); got != want || want != 7 {
		t.Fatalf("in-flight records %d without the batches, %d from the stored object; want 7", got, want)
	}
	kept := full.DeepCopy()
	kept.ManagedFields, kept.Status.StateBatches, kept.Status.InFlightRecords = nil, nil, ptr.To[int64](7)
	if !equality.Semantic.DeepEqual(kept, slim) {
		t.Fatalf("kept %+v, want %+v", slim, kept)
	}

	// The persister's count is taken as it is, without decoding the batches.
	counted := full.DeepCopy()
	counted.Status.InFlightRecords = ptr.To[int64](9)
	counted.Status.StateBatches = []sharestatev1.StateBatch{"garbage"}
	withoutStateBatches(counted)
	if got := inFlight(counted); got != 9 {
		t.Fatalf("a partition whose status counts 9 in-flight records counts %d", got)
	}
	corrupt := full.DeepCopy()
	corrupt.Status.StateBatches = []sharestatev1.StateBatch{"garbage"}
	withoutStateBatches(corrupt)
	if got := inFlight(corrupt); got != 0 {
		t.Fatalf("corrupt batches count %d in-flight records, want 0", got)
	}
	empty := full.DeepCopy()
	empty.Status.StateBatches = nil
	withoutStateBatches(empty)
	if got := inFlight(empty); got != 0 {
		t.Fatalf("a partition without batches counts %d in-flight records, want 0", got)
	}
}
