package operator_test

import (
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

// The operator watches no SharePartitionState: the persister's writes send it no watch event (its
// count of watch bytes for sharepartitionstates stays at zero while its watches of pods and groups
// deliver theirs). The group's totals still come, from the operator's periodic look at every partition,
// counted from the in-flight count the persister keeps beside the batches; and a fence leaves the
// stored batches and count as the persister wrote them.
func TestPartitionWritesNeverReachTheOperator(t *testing.T) {
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
	}

	// The persister created the group with the partitions. A change of the group's spec makes the
	// group pass at once; it counts the partitions once the resync has seen the writes (the writes
	// themselves bring no pass).
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
	requireNoPartitionWatch(t, "after the writes")

	// The broker dies: the operator fences its partitions with patches decided on the listed objects.
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
	requireNoPartitionWatch(t, "after the fence")
}

// requireNoPartitionWatch checks that the operator has received no byte of a SharePartitionState
// watch, while its watch of ShareGroups, counted the same way, has received some.
func requireNoPartitionWatch(t *testing.T, when string) {
	t.Helper()
	if got := watchBytes(t, "sharepartitionstates"); got != 0 {
		t.Fatalf("%s the operator had received %.0f bytes of SharePartitionState watch events, want none", when, got)
	}
	if got := watchBytes(t, "sharegroups"); got == 0 {
		t.Fatalf("%s the operator had counted no bytes of its watch of ShareGroups: the counter counts nothing", when)
	}
}

// watchBytes reads the operator's count of the bytes its watches of resource received.
func watchBytes(t *testing.T, resource string) float64 {
	t.Helper()
	return testenv.CounterSum(t, ctrlmetrics.Registry, "sharestate_operator_watch_bytes_total", "resource", resource)
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
