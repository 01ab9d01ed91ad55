package operator_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

const cacheTestTopic = "q1Sh0o2QRbuBzMz8vEMbvQ"

// The operator's cache holds SharePartitionStates without their state batches and managedFields,
// which its watch cut out of the events before decoding them (itself, not through client-go); the group's in-flight total is still
// counted, from the count the persister keeps beside the batches, and a fence decided on the slimmed
// object leaves the stored batches and count as the persister wrote them.
func TestCacheHoldsNoStateBatches(t *testing.T) {
	testenv.Require(t, env)
	ctx := t.Context()
	ns := env.Namespace(t)
	pod := readyPod(t, ns, "kafka-0")
	p, err := persister.New(persister.Options{Client: env.Client, Namespace: ns,
		Identity: persister.Identity{BrokerID: 0, PodName: pod.Name, PodUID: string(pod.UID)}})
	if err != nil {
		t.Fatal(err)
	}
	topic, err := sharestate.ParseTopicID(cacheTestTopic)
	if err != nil {
		t.Fatal(err)
	}
	// Partition 0: offsets 0-9 acknowledged, 10-14 available (5 in flight); partition 1: 20-21 available
	// (2 in flight).
	writes := map[int32][]sharestate.StateBatch{
		0: {{FirstOffset: 0, LastOffset: 9, DeliveryState: sharestate.DeliveryStateAcknowledged, DeliveryCount: 1},
			{FirstOffset: 10, LastOffset: 14, DeliveryState: sharestate.DeliveryStateAvailable, DeliveryCount: 1}},
		1: {{FirstOffset: 20, LastOffset: 21, DeliveryState: sharestate.DeliveryStateAvailable, DeliveryCount: 2}},
	}
	trimmedBefore, decodedBefore := trimmedWatchBytes(t), decodedWatchEvents(t)
	for partition, batches := range writes {
		initializeReadWrite(t, p, topic, partition, batches)
	}

	inFlight := map[int32]int64{0: 5, 1: 2}
	stored := map[string]*sharestatev1.SharePartitionState{}
	for partition := range writes {
		key := client.ObjectKey{Namespace: ns, Name: sharestatev1.SharePartitionStateName("g", cacheTestTopic, partition)}
		var live sharestatev1.SharePartitionState
		testenv.Get(t, env.Client, key, &live)
		if len(live.Status.StateBatches) == 0 || live.Status.InFlightRecords == nil || *live.Status.InFlightRecords != inFlight[partition] {
			t.Fatalf("%s: the API server holds %d batches, in-flight count %v; want some, and %d",
				key, len(live.Status.StateBatches), live.Status.InFlightRecords, inFlight[partition])
		}
		stored[key.Name] = &live
		// Not the live resourceVersion: the operator's own patches (adoption, conditions) may move the
		// object on meanwhile. The write's in-flight count is what the cache must come to hold.
		testenv.Eventually(t, 30*time.Second, func() error { return cachedWithoutBatches(ctx, key, inFlight[partition]) })
	}
	if trimmed := trimmedWatchBytes(t) - trimmedBefore; trimmed < float64(2*len(`"stateBatches":["10-14/0/1"]`)) {
		t.Fatalf("the operator's watch trimmed %.0f bytes of the writes' events", trimmed)
	}
	if decoded := decodedWatchEvents(t) - decodedBefore; decoded < float64(len(writes)) {
		t.Fatalf("the operator decoded %.0f of the writes' events itself, want them all (%d at least)", decoded, len(writes))
	}

	// The persister created the group with the partitions. Once the cache holds the writes, a change
	// of the group's spec makes the group's next pass count them (the writes themselves do not).
	sg := &sharestatev1.ShareGroup{}
	testenv.Get(t, env.Client, client.ObjectKey{Namespace: ns, Name: sharestatev1.ShareGroupName("g")}, sg)
	patch := client.MergeFrom(sg.DeepCopy())
	sg.Spec.Topics = []sharestatev1.ShareGroupTopic{{TopicID: cacheTestTopic, Name: "orders", Partitions: 2}}
	if err := env.Client.Patch(ctx, sg, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sg), sg); err != nil {
			return err
		}
		if s := sg.Status; s.Partitions != 2 || s.InFlightRecords != 7 {
			return fmt.Errorf("group status: %d partitions, %d in flight; want 2 and 7: %+v", s.Partitions, s.InFlightRecords, s)
		}
		return nil
	})

	// The broker dies: the operator fences its partitions with patches decided on the slimmed objects.
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for name, before := range stored {
		testenv.Eventually(t, 30*time.Second, func() error {
			var now sharestatev1.SharePartitionState
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &now); err != nil {
				return err
			}
			if now.Status.StateEpoch <= before.Status.StateEpoch {
				return fmt.Errorf("%s: state epoch %d, not fenced yet", name, now.Status.StateEpoch)
			}
			if fmt.Sprint(now.Status.StateBatches) != fmt.Sprint(before.Status.StateBatches) ||
				!reflect.DeepEqual(now.Status.InFlightRecords, before.Status.InFlightRecords) {
				return fmt.Errorf("%s: the fence changed the batches from %v to %v, the in-flight count from %v to %v",
					name, before.Status.StateBatches, now.Status.StateBatches, before.Status.InFlightRecords, now.Status.InFlightRecords)
			}
			return nil
		})
	}
}

// cachedWithoutBatches checks that the operator's cache holds the object with the in-flight count of
// its batches, and without the batches or managedFields.
func cachedWithoutBatches(ctx context.Context, key client.ObjectKey, inFlight int64) error {
	var cached sharestatev1.SharePartitionState
	if err := operatorCache.Get(ctx, key, &cached); err != nil {
		return err
	}
	if got := cached.Status.InFlightRecords; got == nil || *got != inFlight {
		return fmt.Errorf("%s: cached with %v records in flight, want %d", key, got, inFlight)
	}
	if len(cached.Status.StateBatches) != 0 || len(cached.ManagedFields) != 0 {
		return fmt.Errorf("%s: cached with %d batches, %d managedFields entries", key, len(cached.Status.StateBatches), len(cached.ManagedFields))
	}
	return nil
}

// trimmedWatchBytes reads the operator's count of the bytes its partition watches trimmed.
func trimmedWatchBytes(t *testing.T) float64 {
	t.Helper()
	return testenv.CounterSum(t, ctrlmetrics.Registry, "sharestate_operator_partition_watch_bytes_total", "part", "trimmed")
}

// decodedWatchEvents reads the operator's count of the partition watch events it decoded itself.
func decodedWatchEvents(t *testing.T) float64 {
	t.Helper()
	return testenv.CounterSum(t, ctrlmetrics.Registry, "sharestate_operator_partition_watch_events_total", "", "")
}

func readyPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "kafka"}}}}
	if err := env.Client.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

func initializeReadWrite(t *testing.T, p *persister.Persister, topic sharestate.TopicID, partition int32, batches []sharestate.StateBatch) {
	t.Helper()
	ctx := t.Context()
	init := p.Initialize(ctx, sharestate.InitializeRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.InitializePartition]{
		{TopicID: topic, Partitions: []sharestate.InitializePartition{{Partition: partition, StateEpoch: 1, StartOffset: 0}}}}})
	if r := init.Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("initialize: %s %s", r.ErrorCode, r.ErrorMessage)
	}
	read := p.Read(ctx, sharestate.ReadRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadPartition]{
		{TopicID: topic, Partitions: []sharestate.ReadPartition{{Partition: partition, LeaderEpoch: 1}}}}})
	if r := read.Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("read: %s %s", r.ErrorCode, r.ErrorMessage)
	}
	write := p.Write(ctx, sharestate.WriteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.WritePartition]{
		{TopicID: topic, Partitions: []sharestate.WritePartition{{Partition: partition, StateEpoch: 1, LeaderEpoch: 1,
			StartOffset: -1, DeliveryCompleteCount: -1, StateBatches: batches}}}}})
	if r := write.Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("write: %s %s", r.ErrorCode, r.ErrorMessage)
	}
}
