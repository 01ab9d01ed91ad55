package controllers

import (
	"strconv"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	// Everything the reconcilers read is kept as it was.
	kept := full.DeepCopy()
	kept.ManagedFields, kept.Status.StateBatches = nil, nil
	kept.Status.WriteTime, kept.Status.WriteCount, kept.Status.LastWriteID, kept.Status.FencedLeader = nil, 0, "", nil
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

// Two partitions decoded apart share one copy of the strings they repeat (namespace, group, topic,
// leader, owner, condition type and reason), and keep their own names.
func TestSlimPartitionStatesShareRepeatedStrings(t *testing.T) {
	decode := func(name string) *sharestatev1.SharePartitionState {
		// Built from fresh bytes each time, as the JSON decoder builds them.
		fresh := func(s string) string { return string([]byte(s)) }
		sps := &sharestatev1.SharePartitionState{
			ObjectMeta: metav1.ObjectMeta{Name: fresh(name), Namespace: fresh("team-a"),
				Labels:          map[string]string{sharestatev1.LabelShareGroup: fresh("orders")},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: fresh("sharestate.dev/v1alpha1"), Kind: fresh("ShareGroup"), Name: fresh("orders"), UID: types.UID(fresh("u-1"))}}},
			Spec: sharestatev1.SharePartitionStateSpec{GroupID: sharestatev1.GroupID(fresh("orders")), TopicID: sharestatev1.TopicID(fresh("q1Sh0o2QRbuBzMz8vEMbvQ")), TopicName: fresh("payments")},
			Status: sharestatev1.SharePartitionStateStatus{Leader: &sharestatev1.LeaderRef{PodName: fresh("kafka-0"), PodUID: fresh("pod-uid")},
				Conditions: []metav1.Condition{{Type: fresh("Initialized"), Status: metav1.ConditionStatus(fresh("True")), Reason: fresh("StateInitialized")}}},
		}
		slimmed, err := SlimPartitionState(sps)
		if err != nil {
			t.Fatal(err)
		}
		return slimmed.(*sharestatev1.SharePartitionState)
	}
	a, b := decode("orders-payments-0"), decode("orders-payments-1")
	same := func(what, x, y string) {
		t.Helper()
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: %q and %q are two copies", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("group label", a.Labels[sharestatev1.LabelShareGroup], b.Labels[sharestatev1.LabelShareGroup])
	same("owner name", a.OwnerReferences[0].Name, b.OwnerReferences[0].Name)
	same("owner uid", string(a.OwnerReferences[0].UID), string(b.OwnerReferences[0].UID))
	same("group", string(a.Spec.GroupID), string(b.Spec.GroupID))
	same("topic", string(a.Spec.TopicID), string(b.Spec.TopicID))
	same("topic name", a.Spec.TopicName, b.Spec.TopicName)
	same("leader pod", a.Status.Leader.PodName, b.Status.Leader.PodName)
	same("leader pod uid", a.Status.Leader.PodUID, b.Status.Leader.PodUID)
	same("condition reason", a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason)
	if a.Name == b.Name {
		t.Fatalf("names %q and %q", a.Name, b.Name)
	}
}

// A full table starts afresh instead of growing, and still answers equal strings.
func TestStringTableIsBounded(t *testing.T) {
	table := &stringTable{strings: map[string]string{}}
	for i := range 3 * maxSharedStrings {
		s := strconv.Itoa(i)
		if got := table.intern(s); got != s {
			t.Fatalf("intern(%q) = %q", s, got)
		}
		if len(table.strings) > maxSharedStrings {
			t.Fatalf("%d strings, above %d", len(table.strings), maxSharedStrings)
		}
	}
}
