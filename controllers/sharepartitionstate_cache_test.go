package controllers

import (
	"reflect"
	"strconv"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// The cache keeps no state batches, no managedFields and no record of the last write, and the group aggregate counts the same
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
			WriteTime: &now, WriteCount: 12, LastWriteID: "w-12", FencedLeader: &sharestatev1.LeaderRef{BrokerID: 2, LeaderEpoch: 2},
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
	// Everything the reconcilers read is kept as it was; the count of a state written before the
	// persister kept it is filled in.
	kept := full.DeepCopy()
	kept.ManagedFields, kept.Status.StateBatches = nil, nil
	kept.Status.WriteTime, kept.Status.WriteCount, kept.Status.LastWriteID, kept.Status.FencedLeader = nil, 0, "", nil
	kept.Status.InFlightRecords = ptr.To[int64](7)
	if !equality.Semantic.DeepEqual(kept, slim) {
		t.Fatalf("cached object %+v, want %+v", slim, kept)
	}

	// The persister's count is taken as it is, without decoding the batches.
	counted := full.DeepCopy()
	counted.Status.InFlightRecords = ptr.To[int64](9)
	counted.Status.StateBatches = []sharestatev1.StateBatch{"garbage"}
	slimmed, _ = SlimPartitionState(counted)
	if got := inFlight(slimmed.(*sharestatev1.SharePartitionState)); got != 9 {
		t.Fatalf("a partition whose status counts 9 in-flight records counts %d", got)
	}
	corrupt := full.DeepCopy()
	corrupt.Status.StateBatches = []sharestatev1.StateBatch{"garbage"}
	slimmed, _ = SlimPartitionState(corrupt)
	if got := inFlight(slimmed.(*sharestatev1.SharePartitionState)); got != 0 {
		t.Fatalf("corrupt batches count %d in-flight records, want 0", got)
	}
	// A state without batches and without the count has none in flight.
	empty := full.DeepCopy()
	empty.Status.StateBatches = nil
	slimmed, _ = SlimPartitionState(empty)
	if got := inFlight(slimmed.(*sharestatev1.SharePartitionState)); got != 0 {
		t.Fatalf("a partition without batches counts %d in-flight records, want 0", got)
	}
	if other, _ := SlimPartitionState("not a partition"); other != "not a partition" {
		t.Fatalf("another object was changed to %v", other)
	}
}

// Two partitions decoded apart share one copy of what they repeat (namespace, group, topic, leader,
// owner, condition type and reason; the group label and the owner reference),
// and keep their own names. Labels of another shape stay the partition's own.
func TestSlimPartitionStatesShareWhatTheyRepeat(t *testing.T) {
	decode := func(name string, labels map[string]string) *sharestatev1.SharePartitionState {
		// Built from fresh bytes each time, as the JSON decoder builds them.
		fresh := func(s string) string { return string([]byte(s)) }
		sps := &sharestatev1.SharePartitionState{
			ObjectMeta: metav1.ObjectMeta{Name: fresh(name), Namespace: fresh("team-a"), Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh("sharestate.dev/v1alpha1"), Kind: fresh("ShareGroup"), Name: fresh("orders"),
					UID: types.UID(fresh("u-1")), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
			Spec: sharestatev1.SharePartitionStateSpec{GroupID: sharestatev1.GroupID(fresh("orders")), TopicID: sharestatev1.TopicID(fresh("q1Sh0o2QRbuBzMz8vEMbvQ")), TopicName: fresh("payments")},
			Status: sharestatev1.SharePartitionStateStatus{StartOffset: 10, StateBatches: []sharestatev1.StateBatch{"10-14/0/1"},
				Leader:     &sharestatev1.LeaderRef{PodName: fresh("kafka-0"), PodUID: fresh("pod-uid")},
				Conditions: []metav1.Condition{{Type: fresh("Initialized"), Status: metav1.ConditionStatus(fresh("True")), Reason: fresh("StateInitialized")}}},
		}
		slimmed, err := SlimPartitionState(sps)
		if err != nil {
			t.Fatal(err)
		}
		return slimmed.(*sharestatev1.SharePartitionState)
	}
	groupLabel := func() map[string]string {
		return map[string]string{sharestatev1.LabelShareGroup: string([]byte("orders"))}
	}
	a, b := decode("orders-payments-0", groupLabel()), decode("orders-payments-1", groupLabel())
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("group", string(a.Spec.GroupID), string(b.Spec.GroupID))
	same("topic", string(a.Spec.TopicID), string(b.Spec.TopicID))
	same("topic name", a.Spec.TopicName, b.Spec.TopicName)
	same("leader pod", a.Status.Leader.PodName, b.Status.Leader.PodName)
	same("leader pod uid", a.Status.Leader.PodUID, b.Status.Leader.PodUID)
	same("condition reason", a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason)
	if reflect.ValueOf(a.Labels).UnsafePointer() != reflect.ValueOf(b.Labels).UnsafePointer() ||
		&a.OwnerReferences[0] != &b.OwnerReferences[0] {
		t.Error("the group label or the owner reference is held twice")
	}
	if a.Name == b.Name || a.Labels[sharestatev1.LabelShareGroup] != "orders" || inFlight(a) != 5 || a.OwnerReferences[0].Name != "orders" {
		t.Fatalf("partition a as cached: %+v", a.ObjectMeta)
	}

	c := decode("orders-payments-2", map[string]string{sharestatev1.LabelShareGroup: "orders", "team": "payments"})
	if reflect.ValueOf(c.Labels).UnsafePointer() == reflect.ValueOf(a.Labels).UnsafePointer() || len(c.Labels) != 2 {
		t.Fatalf("labels of another shape: %v, shared with another partition", c.Labels)
	}
}

// A full table starts afresh instead of growing, and still answers equal strings.
func TestSharesAreBounded(t *testing.T) {
	table := newShares()
	for i := range 3 * maxShared {
		s := strconv.Itoa(i)
		if got := table.intern(s); got != s {
			t.Fatalf("intern(%q) = %q", s, got)
		}
		if len(table.strings) > maxShared {
			t.Fatalf("%d strings, above %d", len(table.strings), maxShared)
		}
	}
}
