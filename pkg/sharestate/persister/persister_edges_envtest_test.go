package persister_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The leader-epoch fence survives a reset (semantics §5): a leader fenced before an Initialize at a higher
// state epoch stays fenced after it, and only Delete starts the leader epoch from 0 again.
func TestLeaderFenceSurvivesReset(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)

	expectCode(t, "initialize at 0", initialize(t, p, "g", 0, 0, -1), sharestate.ErrNone)
	expectCode(t, "read at leader epoch 3", read(t, p, "g", 0, 3).PartitionResult, sharestate.ErrNone)
	expectCode(t, "reset at state epoch 1", initialize(t, p, "g", 0, 1, -1), sharestate.ErrNone)
	expectCode(t, "read at leader epoch 1 after the reset", read(t, p, "g", 0, 1).PartitionResult, sharestate.ErrFencedLeaderEpoch)
	expectCode(t, "write at leader epoch 2 after the reset", write(t, p, "g", writeOf(1, 2, -1)), sharestate.ErrFencedLeaderEpoch)
	if s := summary(t, p, "g", 0); s.LeaderEpoch != 3 || s.StateEpoch != 1 {
		t.Fatalf("summary after the reset: %+v, want leader epoch 3 at state epoch 1", s)
	}
	expectCode(t, "read at leader epoch 3 after the reset", read(t, p, "g", 0, 3).PartitionResult, sharestate.ErrNone)

	expectCode(t, "delete", remove(t, p, "g", 0), sharestate.ErrNone)
	expectCode(t, "initialize after delete", initialize(t, p, "g", 0, 0, -1), sharestate.ErrNone)
	expectCode(t, "read at leader epoch 1 after delete", read(t, p, "g", 0, 1).PartitionResult, sharestate.ErrNone)
}

// No Initialize may leave the state epoch where the operator could not fence it (semantics §5, §9).
func TestInitializeLeavesRoomForAFence(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)

	expectCode(t, "initialize at MaxInt32", initialize(t, p, "g", 0, math.MaxInt32, -1), sharestate.ErrInvalidRequest)
	expectCode(t, "initialize at MaxInt32-1", initialize(t, p, "g", 0, math.MaxInt32-1, -1), sharestate.ErrNone)
	if s := summary(t, p, "g", 0); s.StateEpoch != math.MaxInt32-1 {
		t.Fatalf("summary: %+v", s)
	}
}

// A group id the persister cannot store under its own name is answered per partition, and the
// persister goes on serving (it used to dereference a nil ShareGroup).
func TestInitializeWhenGroupNameIsTaken(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)

	squatter := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName("orders")},
		Spec:       sharestatev1.ShareGroupSpec{GroupID: "payments"},
	}
	if err := env.Client.Create(context.Background(), squatter); err != nil {
		t.Fatal(err)
	}
	req := sharestate.InitializeRequest{GroupID: "orders", Topics: []sharestate.TopicData[sharestate.InitializePartition]{
		{TopicID: topicA, Partitions: []sharestate.InitializePartition{{Partition: 0}, {Partition: 1, StartOffset: -1}, {Partition: -1}}},
		{TopicID: topicB, Partitions: []sharestate.InitializePartition{{Partition: 0}}},
	}}
	resp := p.Initialize(context.Background(), req)
	want := [][]sharestate.ErrorCode{
		{sharestate.ErrUnknownServerError, sharestate.ErrUnknownServerError, sharestate.ErrInvalidRequest},
		{sharestate.ErrUnknownServerError},
	}
	for ti, topic := range resp.Topics {
		for pi, r := range topic.Partitions {
			if r.ErrorCode != want[ti][pi] {
				t.Errorf("topic %d partition %d: got %s (%q), want %s", ti, r.Partition, r.ErrorCode, r.ErrorMessage, want[ti][pi])
			}
		}
	}
	// The squatter's own group and other groups are served as before.
	expectCode(t, "the squatter's group", initialize(t, p, "payments", 0, 0, -1), sharestate.ErrNone)
	expectCode(t, "another group", initialize(t, p, "invoices", 0, 0, -1), sharestate.ErrNone)
}

func TestInvalidUTF8GroupIDIsRefused(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)

	bad := "orders\xff\xfe"
	expectCode(t, "initialize", initialize(t, p, bad, 0, 0, -1), sharestate.ErrInvalidRequest)
	expectCode(t, "read", read(t, p, bad, 0, 0).PartitionResult, sharestate.ErrInvalidRequest)
	expectCode(t, "write", write(t, p, bad, writeOf(0, 0, -1)), sharestate.ErrInvalidRequest)
	expectCode(t, "summary", summary(t, p, bad, 0).PartitionResult, sharestate.ErrInvalidRequest)
	expectCode(t, "delete", remove(t, p, bad, 0), sharestate.ErrInvalidRequest)
}

// A panic in one partition's operation (a bug: here the client panics on status updates of partition
// 1's object) is that partition's UNKNOWN_SERVER_ERROR; the other partitions of the request are
// answered as usual, and the persister goes on serving once the cause is gone.
func TestAPanicFailsOnlyItsPartition(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	c := &panickingClient{Client: newClient(t, env.Config), object: sharestatev1.SharePartitionStateName("g", topicA.String(), 1)}
	p := newPersisterWithOptions(t, persister.Options{Client: c, Namespace: ns})
	expectCode(t, "initialize 0", initialize(t, p, "g", 0, 0, -1), sharestate.ErrNone)
	expectCode(t, "initialize 1", initialize(t, p, "g", 1, 0, -1), sharestate.ErrNone)

	c.panicking.Store(true)
	resp := p.Read(context.Background(), sharestate.ReadRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadPartition]{
		{TopicID: topicA, Partitions: []sharestate.ReadPartition{{Partition: 0, LeaderEpoch: 1}, {Partition: 1, LeaderEpoch: 1}}},
	}})
	got := resp.Topics[0].Partitions
	expectCode(t, "read of partition 0", got[0].PartitionResult, sharestate.ErrNone)
	expectCode(t, "read of partition 1, whose update panics", got[1].PartitionResult, sharestate.ErrUnknownServerError)
	w := p.Write(context.Background(), sharestate.WriteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.WritePartition]{
		{TopicID: topicA, Partitions: []sharestate.WritePartition{{Partition: 1, LeaderEpoch: 1, StartOffset: -1, DeliveryCompleteCount: -1}}},
	}})
	expectCode(t, "write of partition 1, whose update panics", w.Topics[0].Partitions[0], sharestate.ErrUnknownServerError)

	c.panicking.Store(false)
	expectCode(t, "read of partition 1 after", read(t, p, "g", 1, 1).PartitionResult, sharestate.ErrNone)
	expectCode(t, "write of partition 1 after", write(t, p, "g", persisterWrite(1, acked(1, 1))), sharestate.ErrNone)
}

// persisterWrite is a Write of partition at state epoch 0, leader epoch 1.
func persisterWrite(partition int32, batches ...sharestate.StateBatch) sharestate.WritePartition {
	w := writeOf(0, 1, -1, batches...)
	w.Partition = partition
	return w
}

// panickingClient panics, while panicking is set, on every status update of one object.
type panickingClient struct {
	client.Client
	object    string
	panicking atomic.Bool
}

func (c *panickingClient) Status() client.SubResourceWriter {
	return panickingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type panickingStatus struct {
	client.SubResourceWriter
	c *panickingClient
}

func (s panickingStatus) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.c.panicking.Load() && obj.GetName() == s.c.object {
		panic("a bug in the status update of " + obj.GetName())
	}
	return s.SubResourceWriter.Update(ctx, obj, opts...)
}
