package persister

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// storedJSON is a SharePartitionState as the API server answers it: managed fields of two writers,
// conditions, a leader and n batches of the largest common shape (single offsets near 10^12).
func storedJSON(t testing.TB, n int) []byte {
	t.Helper()
	now := metav1.Now()
	obj := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{
			Name: "orders-eu-17-abcdefghijklmnop", Namespace: "kafka", UID: "6f1c7e0a-2b3c-4d5e-8f90-123456789abc",
			ResourceVersion: "123456789", Generation: 1, CreationTimestamp: now,
			Labels: map[string]string{sharestatev1.LabelShareGroup: "orders-eu-abcdefghijklmnop"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "sharestate-sidecar", Operation: "Update", APIVersion: "sharestate.dev/v1alpha1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1:    metav1.NewFieldsV1(`{"f:status":{".":{},"f:createTime":{},"f:deliveryCompleteCount":{},"f:lastWriteId":{},"f:leader":{".":{},"f:brokerId":{},"f:leaderEpoch":{},"f:podName":{},"f:podUID":{},"f:since":{}},"f:leaderEpoch":{},"f:stateBatches":{},"f:stateEpoch":{},"f:startOffset":{},"f:writeCount":{},"f:writeTime":{}}}`),
					Subresource: "status"},
				{Manager: "sharestate-operator", Operation: "Update", APIVersion: "sharestate.dev/v1alpha1", Time: &now, FieldsType: "FieldsV1",
					FieldsV1:    metav1.NewFieldsV1(`{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"Fenced\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:observedGeneration":{}}}`),
					Subresource: "status"},
			},
		},
		Spec: sharestatev1.SharePartitionStateSpec{GroupID: "orders.eu", TopicID: "q1Sh0o2QRbuBzMz8vEMbvQ", TopicName: "orders", Partition: 17},
		Status: sharestatev1.SharePartitionStateStatus{
			StateEpoch: 3, LeaderEpoch: 12, StartOffset: 999999990000, DeliveryCompleteCount: 17,
			Leader:     &sharestatev1.LeaderRef{BrokerID: 2, PodName: "kafka-broker-2", PodUID: "6f1c7e0a-2b3c-4d5e-8f90-123456789abd", LeaderEpoch: 12, Since: now},
			CreateTime: &now, WriteTime: &now, WriteCount: 123456, LastWriteID: "AbCdEfGhIjK",
			Conditions: []metav1.Condition{
				{Type: sharestatev1.ConditionInitialized, Status: "True", Reason: sharestatev1.ReasonStateInitialized, Message: "state initialized at state epoch 3", LastTransitionTime: now},
				{Type: sharestatev1.ConditionFenced, Status: "False", Reason: sharestatev1.ReasonLeaderAlive, Message: "broker 2 (pod kafka-broker-2) leads at leader epoch 12", LastTransitionTime: now},
			},
		},
	}
	for i := range n {
		obj.Status.StateBatches = append(obj.Status.StateBatches, sharestatev1.StateBatch(fmt.Sprintf("%d/%d/%d", 999999990000+2*int64(i), 2*(i%3), 1+i%5)))
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func decodeObjects(t testing.TB, raw []byte, count int) []*sharestatev1.SharePartitionState {
	t.Helper()
	objs := make([]*sharestatev1.SharePartitionState, count)
	for i := range objs {
		objs[i] = &sharestatev1.SharePartitionState{}
		if err := json.Unmarshal(raw, objs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return objs
}

func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// objectBytes must not undercount what a cached object really takes, or the cache's bound would not
// bound the memory; nor overcount it by much, or the cache would hold too little.
func TestObjectBytesCoversTheHeapOfADecodedObject(t *testing.T) {
	for _, batches := range []int{0, 10, 2000} {
		t.Run(strconv.Itoa(batches), func(t *testing.T) {
			raw := storedJSON(t, batches)
			const count = 100
			before := liveHeap()
			objs := decodeObjects(t, raw, count)
			perObject := (liveHeap() - before) / count
			estimate := objectBytes(objs[0])
			t.Logf("%d batches: %d bytes of heap per object, estimated %d", batches, perObject, estimate)
			if estimate < perObject {
				t.Errorf("estimate %d is below the %d bytes an object takes", estimate, perObject)
			}
			if estimate > 2*perObject+objectFixedBytes {
				t.Errorf("estimate %d is far above the %d bytes an object takes", estimate, perObject)
			}
			runtime.KeepAlive(objs)
		})
	}
}

// The cache holds no more than its bound in bytes, however many partitions of large states pass
// through it: the live heap and the process's resident memory grow by no more than the bound (plus
// the runtime's slack, 64 MiB).
func TestCacheStaysWithinItsBoundInBytes(t *testing.T) {
	const bound = 32 << 20
	table := newSlotTable(10000, bound)
	raw := storedJSON(t, 2000)
	before, rssBefore := liveHeap(), residentBytes(t)
	for i := range 1500 { // about 130 KB of objectBytes each: six times the bound in all
		s := table.get(partitionKey{group: "g", partition: int32(i)})
		s.remember(decodeObjects(t, raw, 1)[0])
		if got := table.cachedBytes(); got > bound {
			t.Fatalf("after %d partitions the cache counts %d bytes, above its bound of %d", i+1, got, bound)
		}
	}
	grown, rssGrown := liveHeap()-before, residentBytes(t)-rssBefore
	t.Logf("1500 partitions of 2000 batches through a %d MiB cache: heap +%d MiB, resident +%d MiB, %d cached bytes",
		bound>>20, grown>>20, rssGrown>>20, table.cachedBytes())
	if grown > bound {
		t.Errorf("the live heap grew by %d bytes, above the bound of %d", grown, bound)
	}
	if rssGrown > bound+64<<20 {
		t.Errorf("resident memory grew by %d bytes, above the bound of %d plus 64 MiB", rssGrown, bound)
	}
	runtime.KeepAlive(table)
}

// residentBytes reads the process's resident set size (VmRSS) from /proc.
func residentBytes(t testing.TB) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc on this system: %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}
