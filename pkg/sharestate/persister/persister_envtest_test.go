package persister_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

func acked(first, last int64) sharestate.StateBatch {
	return batch(first, last, sharestate.DeliveryStateAcknowledged, 1)
}

func writeOf(stateEpoch, leaderEpoch int32, start int64, batches ...sharestate.StateBatch) sharestate.WritePartition {
	return sharestate.WritePartition{StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch, StartOffset: start, DeliveryCompleteCount: -1, StateBatches: batches}
}

func getObject(t *testing.T, ns, group string, partition int32) *sharestatev1.SharePartitionState {
	t.Helper()
	var obj sharestatev1.SharePartitionState
	key := client.ObjectKey{Namespace: ns, Name: sharestatev1.SharePartitionStateName(group, topicA.String(), partition)}
	if err := env.Client.Get(context.Background(), key, &obj); err != nil {
		t.Fatal(err)
	}
	return &obj
}

func TestInitialize(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)

	expectCode(t, "first initialize", initialize(t, p, "Orders.EU", 0, 2, 100), sharestate.ErrNone)
	obj := getObject(t, ns, "Orders.EU", 0)
	if obj.Spec.GroupID != "Orders.EU" || obj.Spec.TopicID != sharestatev1.TopicID(topicA.String()) || obj.Status.StateEpoch != 2 ||
		obj.Status.StartOffset != 100 || obj.Status.DeliveryCompleteCount != 0 || obj.Status.CreateTime == nil {
		t.Fatalf("stored %+v %+v", obj.Spec, obj.Status)
	}
	// The ShareGroup was created and owns the state.
	var sg sharestatev1.ShareGroup
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: sharestatev1.ShareGroupName("Orders.EU")}, &sg); err != nil {
		t.Fatalf("no ShareGroup: %v", err)
	}
	if len(obj.OwnerReferences) != 1 || obj.OwnerReferences[0].UID != sg.UID || obj.Labels[sharestatev1.LabelShareGroup] != sg.Name {
		t.Fatalf("owner %+v labels %v, want the ShareGroup %s", obj.OwnerReferences, obj.Labels, sg.UID)
	}

	expectCode(t, "read", read(t, p, "Orders.EU", 0, 1).PartitionResult, sharestate.ErrNone)
	expectCode(t, "write", write(t, p, "Orders.EU", writeOf(2, 1, 105, acked(105, 107))), sharestate.ErrNone)
	expectCode(t, "initialize at an older epoch", initialize(t, p, "Orders.EU", 0, 1, 0), sharestate.ErrFencedStateEpoch)

	// A higher state epoch resets everything, the start offset included, even downwards; the leader
	// epoch alone survives (semantics §5).
	expectCode(t, "reset", initialize(t, p, "Orders.EU", 0, 3, -1), sharestate.ErrNone)
	s := summary(t, p, "Orders.EU", 0)
	if s.StateEpoch != 3 || s.LeaderEpoch != 1 || s.StartOffset != -1 || s.DeliveryCompleteCount != -1 {
		t.Fatalf("after reset: %+v", s)
	}
	if r := read(t, p, "Orders.EU", 0, 1); len(r.StateBatches) != 0 || r.StateEpoch != 3 {
		t.Fatalf("after reset: %+v", r)
	}

	for name, in := range map[string]sharestate.InitializePartition{
		"negative state epoch":  {Partition: 0, StateEpoch: -1},
		"negative partition":    {Partition: -1, StateEpoch: 1},
		"start offset below -1": {Partition: 0, StateEpoch: 9, StartOffset: -2},
	} {
		expectCode(t, name, only(t, p.Initialize(context.Background(), one("Orders.EU", in))), sharestate.ErrInvalidRequest)
	}
	zeroTopic := sharestate.InitializeRequest{GroupID: "Orders.EU", Topics: []sharestate.TopicData[sharestate.InitializePartition]{{Partitions: []sharestate.InitializePartition{{StateEpoch: 1}}}}}
	expectCode(t, "zero topic id", only(t, p.Initialize(context.Background(), zeroTopic)), sharestate.ErrInvalidRequest)
	expectCode(t, "empty group", initialize(t, p, "", 0, 1, 0), sharestate.ErrInvalidRequest)
}

// Two offset resets in a row at the group's unchanged epoch, as Kafka's group coordinator sends them
// (semantics §5): each writes a fresh state over the progress, the start offset going down included,
// and keeps the leader epoch.
func TestResetTwiceAtOneStateEpoch(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)

	expectCode(t, "first initialize", initialize(t, p, "Orders.EU", 0, 2, 100), sharestate.ErrNone)
	expectCode(t, "read", read(t, p, "Orders.EU", 0, 1).PartitionResult, sharestate.ErrNone)
	for i, start := range []int64{50, 0} {
		expectCode(t, "write", write(t, p, "Orders.EU", writeOf(2, 1, 105, acked(105, 107))), sharestate.ErrNone)
		before := getObject(t, ns, "Orders.EU", 0)
		if before.Status.StartOffset != 105 || len(before.Status.StateBatches) != 1 || before.Status.Leader == nil {
			t.Fatalf("reset %d: before it %+v", i, before.Status)
		}
		expectCode(t, "initialize again at the same epoch", initialize(t, p, "Orders.EU", 0, 2, start), sharestate.ErrNone)
		st := getObject(t, ns, "Orders.EU", 0).Status
		if st.StateEpoch != 2 || st.LeaderEpoch != 1 || st.StartOffset != start || st.DeliveryCompleteCount != 0 ||
			len(st.StateBatches) != 0 || st.Leader != nil || st.WriteCount != 0 || st.InitializeCount != before.Status.InitializeCount+1 {
			t.Fatalf("reset %d to %d: %+v", i, start, st)
		}
		if r := read(t, p, "Orders.EU", 0, 1); r.StartOffset != start || len(r.StateBatches) != 0 {
			t.Fatalf("reset %d to %d, read: %+v", i, start, r)
		}
	}
	if c := getObject(t, ns, "Orders.EU", 0).Status.InitializeCount; c != 3 {
		t.Fatalf("initializeCount %d after three Initializes, want 3", c)
	}
}

func TestReadAndWrite(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)

	expectCode(t, "read uninitialized", read(t, p, "g", 0, 0).PartitionResult, sharestate.ErrInvalidRequest)
	expectCode(t, "write uninitialized", write(t, p, "g", writeOf(0, 0, -1)), sharestate.ErrInvalidRequest)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 0), sharestate.ErrNone)

	expectCode(t, "read with leader epoch 4", read(t, p, "g", 0, 4).PartitionResult, sharestate.ErrNone)
	obj := getObject(t, ns, "g", 0)
	if obj.Status.LeaderEpoch != 4 || obj.Status.Leader == nil || obj.Status.Leader.BrokerID != 1 ||
		obj.Status.Leader.PodName != "broker-1" || obj.Status.Leader.PodUID != "uid-broker-1" || obj.Status.Leader.LeaderEpoch != 4 {
		t.Fatalf("Read did not record the leader: %+v", obj.Status)
	}
	expectCode(t, "read with an older leader epoch", read(t, p, "g", 0, 3).PartitionResult, sharestate.ErrFencedLeaderEpoch)
	expectCode(t, "read with a negative leader epoch", read(t, p, "g", 0, -1).PartitionResult, sharestate.ErrInvalidRequest)

	expectCode(t, "write with an older leader epoch", write(t, p, "g", writeOf(1, 3, -1)), sharestate.ErrFencedLeaderEpoch)
	expectCode(t, "write with an older state epoch", write(t, p, "g", writeOf(0, 4, -1)), sharestate.ErrFencedStateEpoch)
	expectCode(t, "write with negative state epoch", write(t, p, "g", writeOf(-1, 4, -1)), sharestate.ErrInvalidRequest)
	expectCode(t, "write with a bad batch", write(t, p, "g", writeOf(1, 4, -1, batch(5, 4, 0, 1))), sharestate.ErrInvalidRequest)
	expectCode(t, "write of an acquired batch", write(t, p, "g", writeOf(1, 4, -1, batch(5, 6, sharestate.DeliveryStateAcquired, 1))), sharestate.ErrInvalidRequest)
	tooMany := make([]sharestate.StateBatch, 2001)
	for i := range tooMany {
		tooMany[i] = acked(int64(2*i), int64(2*i))
	}
	expectCode(t, "write of too many batches", write(t, p, "g", writeOf(1, 4, -1, tooMany...)), sharestate.ErrInvalidRequest)

	// The spec's first worked example, through the API server.
	expectCode(t, "write 1", write(t, p, "g", writeOf(1, 4, 111, batch(111, 120, 0, 1))), sharestate.ErrNone)
	w := writeOf(1, 4, 111, batch(111, 113, 0, 2), batch(114, 114, 2, 1), batch(115, 119, 0, 2))
	w.DeliveryCompleteCount = 1
	expectCode(t, "write 2", write(t, p, "g", w), sharestate.ErrNone)
	r := read(t, p, "g", 0, 4)
	want := []sharestate.StateBatch{batch(111, 113, 0, 2), batch(114, 114, 2, 1), batch(115, 119, 0, 2), batch(120, 120, 0, 1)}
	if r.StartOffset != 111 || !equal(r.StateBatches, want) {
		t.Fatalf("combined %+v, want %+v", r, want)
	}

	// Write never changes the epochs, and the start offset never goes back.
	expectCode(t, "write with higher epochs", write(t, p, "g", writeOf(7, 9, 50)), sharestate.ErrNone)
	s := summary(t, p, "g", 0)
	if s.StateEpoch != 1 || s.LeaderEpoch != 4 || s.StartOffset != 111 || s.DeliveryCompleteCount != 1 {
		t.Fatalf("summary %+v", s)
	}
	if obj := getObject(t, ns, "g", 0); obj.Status.Leader.LeaderEpoch != 9 || obj.Status.WriteCount != 3 {
		t.Fatalf("write records the leader at its epoch and counts writes: %+v", obj.Status)
	}
}

func TestDeleteAndReadSummary(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)

	s := summary(t, p, "g", 3)
	expectCode(t, "summary of nothing", s.PartitionResult, sharestate.ErrNone)
	if s.StateEpoch != 0 || s.LeaderEpoch != 0 || s.StartOffset != -1 || s.DeliveryCompleteCount != -1 || s.Partition != 3 {
		t.Fatalf("summary of nothing: %+v", s)
	}
	expectCode(t, "delete of nothing", remove(t, p, "g", 3), sharestate.ErrNone)

	expectCode(t, "initialize", initialize(t, p, "g", 3, 5, 10), sharestate.ErrNone)
	expectCode(t, "write", write(t, p, "g", sharestate.WritePartition{Partition: 3, StateEpoch: 5, StartOffset: 10, DeliveryCompleteCount: -1, StateBatches: []sharestate.StateBatch{acked(10, 12)}}), sharestate.ErrNone)
	expectCode(t, "delete", remove(t, p, "g", 3), sharestate.ErrNone)
	expectCode(t, "read after delete", read(t, p, "g", 3, 0).PartitionResult, sharestate.ErrInvalidRequest)
	expectCode(t, "write after delete", write(t, p, "g", sharestate.WritePartition{Partition: 3, StateEpoch: 5, StartOffset: -1, DeliveryCompleteCount: -1}), sharestate.ErrInvalidRequest)
	if s := summary(t, p, "g", 3); s.StateEpoch != 0 || s.StartOffset != -1 {
		t.Fatalf("summary after delete: %+v", s)
	}
	// After a delete any state epoch initializes again.
	expectCode(t, "initialize after delete", initialize(t, p, "g", 3, 0, 0), sharestate.ErrNone)
}

func TestUnknownTopicOrPartition(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName("declared")},
		Spec:       sharestatev1.ShareGroupSpec{GroupID: "declared", Topics: []sharestatev1.ShareGroupTopic{{TopicID: sharestatev1.TopicID(topicA.String()), Partitions: 2}}},
	}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	p := newPersister(t, ns, 1)
	expectCode(t, "initialize a declared partition", initialize(t, p, "declared", 1, 1, 0), sharestate.ErrNone)
	expectCode(t, "initialize past the partition count", initialize(t, p, "declared", 2, 1, 0), sharestate.ErrUnknownTopicOrPartition)
	expectCode(t, "read past the partition count", read(t, p, "declared", 2, 0).PartitionResult, sharestate.ErrInvalidRequest) // uninitialized comes first
	expectCode(t, "summary past the partition count", summary(t, p, "declared", 2).PartitionResult, sharestate.ErrUnknownTopicOrPartition)
	expectCode(t, "delete past the partition count", remove(t, p, "declared", 2), sharestate.ErrUnknownTopicOrPartition)
	undeclared := sharestate.ReadSummaryRequest{GroupID: "declared", Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{{TopicID: topicB, Partitions: []sharestate.ReadSummaryPartition{{Partition: 0}}}}}
	expectCode(t, "summary of an undeclared topic", only(t, p.ReadSummary(ctx, undeclared)).PartitionResult, sharestate.ErrUnknownTopicOrPartition)

	// A state that exists for a partition the group no longer declares: fencing checks come first.
	expectCode(t, "read", read(t, p, "declared", 1, 2).PartitionResult, sharestate.ErrNone)
	sg.Spec.Topics[0].Partitions = 1
	if err := env.Client.Update(ctx, sg); err != nil {
		t.Fatal(err)
	}
	fresh := newPersister(t, ns, 2) // no cached topology
	expectCode(t, "fenced before unknown", write(t, fresh, "declared", sharestate.WritePartition{Partition: 1, StateEpoch: 1, LeaderEpoch: 1, StartOffset: -1, DeliveryCompleteCount: -1}), sharestate.ErrFencedLeaderEpoch)
	expectCode(t, "unknown last", write(t, fresh, "declared", sharestate.WritePartition{Partition: 1, StateEpoch: 1, LeaderEpoch: 2, StartOffset: -1, DeliveryCompleteCount: -1}), sharestate.ErrUnknownTopicOrPartition)
}

// One partition's error never fails the others of the same request.
func TestMultiPartitionRequests(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	p := newPersister(t, ns, 1)
	init := p.Initialize(ctx, sharestate.InitializeRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.InitializePartition]{
		{TopicID: topicA, Partitions: []sharestate.InitializePartition{{Partition: 0, StateEpoch: 1}, {Partition: 1, StateEpoch: 1}, {Partition: -1, StateEpoch: 1}}},
		{TopicID: topicB, Partitions: []sharestate.InitializePartition{{Partition: 0, StateEpoch: 1}}},
	}})
	codes := func(resp sharestate.Response[sharestate.PartitionResult]) []sharestate.ErrorCode {
		var out []sharestate.ErrorCode
		for _, topic := range resp.Topics {
			for _, part := range topic.Partitions {
				out = append(out, part.ErrorCode)
			}
		}
		return out
	}
	if got := codes(init); !equalCodes(got, sharestate.ErrNone, sharestate.ErrNone, sharestate.ErrInvalidRequest, sharestate.ErrNone) {
		t.Fatalf("initialize codes %v", got)
	}
	if init.Topics[0].Partitions[2].Partition != -1 || init.Topics[1].TopicID != topicB {
		t.Fatalf("answers out of request order: %+v", init)
	}
	expectCode(t, "read", read(t, p, "g", 1, 5).PartitionResult, sharestate.ErrNone) // partition 1 now at leader epoch 5

	w := p.Write(ctx, sharestate.WriteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.WritePartition]{
		{TopicID: topicA, Partitions: []sharestate.WritePartition{
			{Partition: 0, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: -1, StateBatches: []sharestate.StateBatch{acked(0, 1)}},
			{Partition: 1, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: -1}, // fenced
			{Partition: 2, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: -1}, // uninitialized
		}},
		{TopicID: topicB, Partitions: []sharestate.WritePartition{
			{Partition: 0, StateEpoch: 0, LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: -1}, // fenced state epoch
		}},
	}})
	if got := codes(w); !equalCodes(got, sharestate.ErrNone, sharestate.ErrFencedLeaderEpoch, sharestate.ErrInvalidRequest, sharestate.ErrFencedStateEpoch) {
		t.Fatalf("write codes %v", got)
	}
	if r := read(t, p, "g", 0, 1); !equal(r.StateBatches, []sharestate.StateBatch{acked(0, 1)}) {
		t.Fatalf("the good partition's write was lost: %+v", r)
	}
}

// A new leader's Read with a higher leader epoch fences the old leader, whose writes then fail while
// the new leader's succeed; and back again.
func TestTwoPersistersFenceEachOther(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	old, next := newPersister(t, ns, 1), newPersister(t, ns, 2)
	expectCode(t, "initialize", initialize(t, old, "g", 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "old leader reads", read(t, old, "g", 0, 1).PartitionResult, sharestate.ErrNone)
	expectCode(t, "old leader writes", write(t, old, "g", writeOf(1, 1, 0, acked(0, 0))), sharestate.ErrNone)

	expectCode(t, "new leader reads", read(t, next, "g", 0, 2).PartitionResult, sharestate.ErrNone)
	if l := getObject(t, ns, "g", 0).Status.Leader; l == nil || l.BrokerID != 2 || l.LeaderEpoch != 2 {
		t.Fatalf("leader %+v, want broker 2 at epoch 2", l)
	}
	// The old leader's cached object is stale now: its write conflicts, re-reads, and is fenced.
	expectCode(t, "old leader writes again", write(t, old, "g", writeOf(1, 1, 0, acked(1, 1))), sharestate.ErrFencedLeaderEpoch)
	expectCode(t, "new leader writes", write(t, next, "g", writeOf(1, 2, 0, acked(2, 2))), sharestate.ErrNone)
	expectCode(t, "old leader reads", read(t, old, "g", 0, 1).PartitionResult, sharestate.ErrFencedLeaderEpoch)

	// Leadership moves back with a still higher epoch.
	expectCode(t, "old broker leads again", read(t, old, "g", 0, 3).PartitionResult, sharestate.ErrNone)
	expectCode(t, "broker 2 is fenced", write(t, next, "g", writeOf(1, 2, 0, acked(3, 3))), sharestate.ErrFencedLeaderEpoch)
	r := read(t, old, "g", 0, 3)
	if !equal(r.StateBatches, []sharestate.StateBatch{acked(0, 0), acked(2, 2)}) {
		t.Fatalf("only the live leaders' writes may land: %+v", r.StateBatches)
	}
}

// A state-epoch bump written by someone else (the operator's fence) fences a persister whose cache
// still holds the old epoch.
func TestStaleCacheIsFencedByStateEpoch(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "read", read(t, p, "g", 0, 1).PartitionResult, sharestate.ErrNone)
	expectCode(t, "write", write(t, p, "g", writeOf(1, 1, 0, acked(0, 0))), sharestate.ErrNone)

	obj := getObject(t, ns, "g", 0)
	obj.Status.StateEpoch = 2
	obj.Status.Leader = nil
	if err := env.Client.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	expectCode(t, "write after the fence", write(t, p, "g", writeOf(1, 1, 0, acked(1, 1))), sharestate.ErrFencedStateEpoch)
	r := read(t, p, "g", 0, 1)
	if r.StateEpoch != 2 || !equal(r.StateBatches, []sharestate.StateBatch{acked(0, 0)}) {
		t.Fatalf("after the fence: %+v", r)
	}
	expectCode(t, "write at the new epoch", write(t, p, "g", writeOf(2, 1, 0, acked(1, 1))), sharestate.ErrNone)
}

// A stored object whose batches are corrupt is reported, never used; a reset, even at the stored state
// epoch, recovers it. The schema bounds only a batch's shape (api/v1alpha1, StateBatch), so kubectl can
// store a batch of that shape that breaks the grammar, as well as batches that overlap.
func TestCorruptStoredStateIsReported(t *testing.T) {
	testenv.Require(t, env)
	for _, tt := range []struct {
		name    string
		batches []sharestatev1.StateBatch
	}{
		{"batches that overlap", []sharestatev1.StateBatch{"5-10/0/1", "7/2/1"}},
		{"a batch in state 1, ACQUIRED", []sharestatev1.StateBatch{"110/1/1"}},
		{"a last offset below the first", []sharestatev1.StateBatch{"110-105/0/1"}},
		{"a count above an int16", []sharestatev1.StateBatch{"110/0/40000"}},
	} {
		t.Run(tt.name, func(t *testing.T) { checkCorruptStateReported(t, tt.batches) })
	}
}

func checkCorruptStateReported(t *testing.T, batches []sharestatev1.StateBatch) {
	t.Helper()
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 0), sharestate.ErrNone)
	obj := getObject(t, ns, "g", 0)
	obj.Status.StateBatches = batches
	if err := env.Client.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	r := read(t, p, "g", 0, 0)
	if r.ErrorCode != sharestate.ErrUnknownServerError || !strings.Contains(r.ErrorMessage, "corrupt") {
		t.Fatalf("read of a corrupt state: %+v", r)
	}
	expectCode(t, "write to a corrupt state", write(t, p, "g", writeOf(1, 0, -1)), sharestate.ErrUnknownServerError)
	if got := getObject(t, ns, "g", 0).Status.StateBatches; !slices.Equal(got, batches) {
		t.Fatalf("the corrupt state was overwritten: %v", got)
	}
	expectCode(t, "summary still answers", summary(t, p, "g", 0).PartitionResult, sharestate.ErrNone)
	expectCode(t, "reset at an older state epoch", initialize(t, p, "g", 0, 0, 0), sharestate.ErrUnknownServerError)
	expectCode(t, "reset at the stored state epoch", initialize(t, p, "g", 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "read after reset", read(t, p, "g", 0, 0).PartitionResult, sharestate.ErrNone)
}

// An unreachable API server is answered with a retriable error once the operation's time is up.
func TestUnreachableAPIServer(t *testing.T) {
	testenv.Require(t, env)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = "https://127.0.0.1:1" // nothing listens there
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme, Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	p, err := persister.New(persister.Options{Client: c, Namespace: "x", OperationTimeout: time.Second, RequestTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	expectCode(t, "write", write(t, p, "g", writeOf(1, 1, -1)), sharestate.ErrCoordinatorNotAvailable)
	expectCode(t, "read", read(t, p, "g", 0, 1).PartitionResult, sharestate.ErrCoordinatorNotAvailable)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 0), sharestate.ErrCoordinatorNotAvailable)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v: the retries are not bounded", d)
	}
}

// countingConfig counts the requests a client makes, by method.
func countingConfig(counts *sync.Map) *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			n, _ := counts.LoadOrStore(r.Method, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func count(counts *sync.Map, method string) int64 {
	n, ok := counts.Load(method)
	if !ok {
		return 0
	}
	return n.(*atomic.Int64).Load()
}

// In the steady state a write costs one request: the status update, with no GET before it.
func TestSteadyStateWriteIsOneRequest(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	var counts sync.Map
	p := newPersisterWithConfig(t, countingConfig(&counts), ns, 1)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "read", read(t, p, "g", 0, 1).PartitionResult, sharestate.ErrNone)
	counts.Clear()
	const writes = 50
	for i := range int64(writes) {
		expectCode(t, "write", write(t, p, "g", writeOf(1, 1, i, acked(i, i))), sharestate.ErrNone)
	}
	if gets, puts := count(&counts, http.MethodGet), count(&counts, http.MethodPut); gets != 0 || puts != writes {
		t.Fatalf("%d writes made %d GETs and %d PUTs, want 0 and %d", writes, gets, puts, writes)
	}
}

// Writes that arrive together on one partition share status updates, and each gets its own answer.
func TestGroupCommit(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	var counts sync.Map
	p := newPersisterWithConfig(t, countingConfig(&counts), ns, 1)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "read", read(t, p, "g", 0, 2).PartitionResult, sharestate.ErrNone)
	counts.Clear()

	const writers = 64
	var wg sync.WaitGroup
	results := make([]sharestate.PartitionResult, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leaderEpoch := int32(2)
			if i%8 == 7 {
				leaderEpoch = 1 // a fenced writer among them fails alone
			}
			results[i] = write(t, p, "g", writeOf(1, leaderEpoch, -1, acked(int64(2*i), int64(2*i))))
		}()
	}
	wg.Wait()
	var want []sharestate.StateBatch
	for i, r := range results {
		if i%8 == 7 {
			expectCode(t, "fenced writer", r, sharestate.ErrFencedLeaderEpoch)
			continue
		}
		expectCode(t, "writer", r, sharestate.ErrNone)
		want = append(want, acked(int64(2*i), int64(2*i)))
	}
	if got := read(t, p, "g", 0, 2).StateBatches; !equal(got, want) {
		t.Fatalf("stored %v, want every successful write's batch %v", got, want)
	}
	puts := count(&counts, http.MethodPut)
	t.Logf("%d concurrent writes took %d status updates", writers, puts)
	if puts >= writers/2 {
		t.Fatalf("%d status updates for %d concurrent writes: writes are not combined", puts, writers)
	}
}

func equal(a, b []sharestate.StateBatch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalCodes(got []sharestate.ErrorCode, want ...sharestate.ErrorCode) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

// A ShareGroup a user created under a name of their choosing is the group's: its declared topics
// apply, and Initialize neither creates a second ShareGroup nor leaves the state unowned.
func TestUserNamedShareGroup(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec:       sharestatev1.ShareGroupSpec{GroupID: "orders-processors", Topics: []sharestatev1.ShareGroupTopic{{TopicID: sharestatev1.TopicID(topicA.String()), Partitions: 1}}},
	}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	p := newPersister(t, ns, 1)
	expectCode(t, "undeclared partition", initialize(t, p, "orders-processors", 1, 0, 0), sharestate.ErrUnknownTopicOrPartition)
	expectCode(t, "declared partition", initialize(t, p, "orders-processors", 0, 0, 0), sharestate.ErrNone)
	var groups sharestatev1.ShareGroupList
	if err := env.Client.List(ctx, &groups, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(groups.Items) != 1 {
		t.Fatalf("%d ShareGroups, want only the user's", len(groups.Items))
	}
	obj := getObject(t, ns, "orders-processors", 0)
	if owner := metav1.GetControllerOf(obj); owner == nil || owner.UID != sg.UID || obj.Labels[sharestatev1.LabelShareGroup] != "orders" {
		t.Fatalf("state owned by %+v, labels %v; want the user's ShareGroup", obj.OwnerReferences, obj.Labels)
	}
}

// TestCreatedStateNamesDeclaredTopic: the object Initialize creates carries the topic's name when the
// group declares one (the TOPIC column of kubectl get sps), and none when it does not.
func TestCreatedStateNamesDeclaredTopic(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: sharestatev1.ShareGroupSpec{GroupID: "named", Topics: []sharestatev1.ShareGroupTopic{
			{TopicID: sharestatev1.TopicID(topicA.String()), Name: "orders", Partitions: 2}}},
	}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	p := newPersister(t, ns, 1)
	expectCode(t, "initialize in a group that names the topic", initialize(t, p, "named", 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "initialize in a group that declares nothing", initialize(t, p, "anonymous", 0, 1, 0), sharestate.ErrNone)
	for group, want := range map[string]string{"named": "orders", "anonymous": ""} {
		var obj sharestatev1.SharePartitionState
		key := client.ObjectKey{Namespace: ns, Name: sharestatev1.SharePartitionStateName(group, topicA.String(), 0)}
		testenv.Get(t, env.Client, key, &obj)
		if obj.Spec.TopicName != want {
			t.Errorf("group %s: spec.topicName %q, want %q", group, obj.Spec.TopicName, want)
		}
	}
}
