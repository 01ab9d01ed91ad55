package partitionbook

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// A partition's summary keeps what a group's status and its adoption read, and counts the in-flight
// records the persister keeps, or the batches of a state written before it kept them.
func TestSummaryOfAPartition(t *testing.T) {
	now := metav1.Now()
	full := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{sharestatev1.LabelShareGroup: "g"},
			OwnerReferences: []metav1.OwnerReference{{UID: "group-uid", Controller: ptr.To(true)}}},
		Spec: sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: "q1Sh0o2QRbuBzMz8vEMbvQ", TopicName: "orders", Partition: 7},
		Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 2, LeaderEpoch: 3, StartOffset: 10, DeliveryCompleteCount: 4,
			StateBatches: []sharestatev1.StateBatch{"10-14/0/1", "15/2/1", "16-17/3/1"}, CreateTime: &now,
			Leader: &sharestatev1.LeaderRef{BrokerID: 1, PodName: "kafka-0", PodUID: "u", LeaderEpoch: 3, Since: now}},
	}
	want := Summary{Name: "p", Misnamed: true, TopicID: "q1Sh0o2QRbuBzMz8vEMbvQ", Partition: 7, StateEpoch: 2, Initialized: true,
		WithLeader: true, InFlight: 7, DeliveryComplete: 4, Controller: "group-uid", GroupLabel: "g", TopicNamed: true}
	if got := SummaryOf(full); got != want {
		t.Fatalf("summary %+v, want %+v", got, want)
	}

	counted := full.DeepCopy()
	counted.Status.InFlightRecords = ptr.To[int64](9)
	counted.Status.StateBatches = []sharestatev1.StateBatch{"garbage"}
	counted.Status.DeliveryCompleteCount = -1
	if got := SummaryOf(counted); got.InFlight != 9 || got.DeliveryComplete != 0 {
		t.Fatalf("a status counting 9 in flight, delivery-complete unknown: %+v", got)
	}
	corrupt := full.DeepCopy()
	corrupt.Status.StateBatches = []sharestatev1.StateBatch{"garbage"}
	if got := SummaryOf(corrupt); got.InFlight != 0 {
		t.Fatalf("corrupt batches count %d in flight, want 0", got.InFlight)
	}
	bare := &sharestatev1.SharePartitionState{}
	bare.Name = sharestatev1.SharePartitionStateName("", "", 0)
	if got := SummaryOf(bare); got != (Summary{Name: bare.Name}) {
		t.Fatalf("an empty partition's summary %+v", got)
	}
}

// A listed partition keeps everything but its state batches and managedFields, and the in-flight count
// its batches stood for.
func TestDropStateBatches(t *testing.T) {
	now := metav1.Now()
	full := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", ResourceVersion: "42",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "sidecar", Operation: metav1.ManagedFieldsOperationUpdate}}},
		Spec: sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: "q1Sh0o2QRbuBzMz8vEMbvQ", Partition: 7},
		Status: sharestatev1.SharePartitionStateStatus{StateEpoch: 2, CreateTime: &now,
			StateBatches: []sharestatev1.StateBatch{"10-14/0/1", "15/2/1", "16-17/3/1"}},
	}
	slim := full.DeepCopy()
	DropStateBatches(slim)
	kept := full.DeepCopy()
	kept.ManagedFields, kept.Status.StateBatches, kept.Status.InFlightRecords = nil, nil, ptr.To[int64](7)
	if !equality.Semantic.DeepEqual(kept, slim) {
		t.Fatalf("kept %+v, want %+v", slim, kept)
	}
	counted := full.DeepCopy()
	counted.Status.InFlightRecords = ptr.To[int64](9)
	DropStateBatches(counted)
	if got := InFlight(counted); got != 9 {
		t.Fatalf("the persister's count of 9 became %d", got)
	}
}
