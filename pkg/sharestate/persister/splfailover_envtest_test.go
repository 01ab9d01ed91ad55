package persister_test

import (
	"context"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/leader"
)

// failoverManager is a broker's share-partition leader: a Manager over the broker's own persister,
// leading every partition at leaderEpoch.
func failoverManager(t *testing.T, p *persister.Persister, leaderEpoch int32) *leader.Manager {
	t.Helper()
	m, err := leader.NewManager(leader.ManagerOptions{
		Store:       p,
		LeaderEpoch: func(sharestate.TopicID, int32) (int32, bool) { return leaderEpoch, true },
		Partition: leader.SharePartitionOptions{
			Retry: func(calls int) (time.Duration, bool) { return 100 * time.Millisecond, calls < 3 },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// deliveries follows, per offset, how often it was delivered and whether its delivery completed
// (acknowledged or rejected, answered NONE), to check semantics §10.5 across failovers.
type deliveries struct {
	t         *testing.T
	delivered map[int64]int
	done      map[int64]bool
}

// fetch fetches partition 0 for member through m, checks that nothing done is delivered again, and
// returns the offsets it got.
func (d *deliveries) fetch(m *leader.Manager, group, member string, logEnd int64) (sharestate.ErrorCode, []int64) {
	d.t.Helper()
	resp := only(d.t, m.Fetch(context.Background(), member, one(group, leader.FetchPartition{LogEndOffset: logEnd, MaxRecords: 1000})))
	var offsets []int64
	for _, r := range resp.Records {
		for off := r.FirstOffset; off <= r.LastOffset; off++ {
			if d.done[off] {
				d.t.Fatalf("offset %d was delivered to %s after its delivery completed", off, member)
			}
			d.delivered[off]++
			offsets = append(offsets, off)
		}
	}
	return resp.ErrorCode, offsets
}

// ack acknowledges [first, last] for member through m and remembers what completed.
func (d *deliveries) ack(m *leader.Manager, group, member string, first, last int64, typ leader.AckType) sharestate.PartitionResult {
	d.t.Helper()
	in := leader.AcknowledgePartition{Batches: []leader.AckBatch{{FirstOffset: first, LastOffset: last, Type: typ}}}
	res := only(d.t, m.Acknowledge(context.Background(), member, one(group, in)))
	if res.ErrorCode == sharestate.ErrNone && typ != leader.AckRelease {
		for off := first; off <= last; off++ {
			d.done[off] = true
		}
	}
	return res
}

// fetchOK is fetch, which must answer NONE.
func (d *deliveries) fetchOK(m *leader.Manager, group, member string, logEnd int64) []int64 {
	d.t.Helper()
	code, offsets := d.fetch(m, group, member, logEnd)
	if code != sharestate.ErrNone {
		d.t.Fatalf("fetch for %s: %s", member, code)
	}
	return offsets
}

func wantOffsets(t *testing.T, what string, got []int64, first, last int64) {
	t.Helper()
	if int64(len(got)) != last-first+1 {
		t.Fatalf("%s: got offsets %v, want %d-%d", what, got, first, last)
	}
	for i, off := range got {
		if off != first+int64(i) {
			t.Fatalf("%s: got offsets %v, want %d-%d", what, got, first, last)
		}
	}
}

// Two brokers, each with its own persister, lead one share-partition in turn (semantics §8, §9, §10.5).
// Broker 2's Read with a higher leader epoch takes over: broker 1's next acknowledgement is answered
// NOT_LEADER_OR_FOLLOWER and its share-partition is fenced and dropped. Then the operator fences
// broker 2's state epoch: its next acknowledgement is refused the same way, and its next fetch
// reloads the state and goes on. Completed offsets are never delivered again; the others are.
func TestSharePartitionLeaderFailover(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	const group = "failover"
	key := leader.SharePartitionKey{GroupID: group, TopicID: topicA, Partition: 0}
	p1, p2 := newPersister(t, ns, 1), newPersister(t, ns, 2)
	expectCode(t, "initialize", initialize(t, p1, group, 0, 1, -1), sharestate.ErrNone)
	broker1, broker2 := failoverManager(t, p1, 1), failoverManager(t, p2, 2)
	d := &deliveries{t: t, delivered: map[int64]int{}, done: map[int64]bool{}}

	// Broker 1 leads at leader epoch 1: the start offset -1 becomes 0 (earliest).
	wantOffsets(t, "broker 1's first fetch", d.fetchOK(broker1, group, "c1", 20), 0, 19)
	expectCode(t, "broker 1 accepts 0-9", d.ack(broker1, group, "c1", 0, 9, leader.AckAccept), sharestate.ErrNone)
	expectCode(t, "broker 1 rejects 10-11", d.ack(broker1, group, "c1", 10, 11, leader.AckReject), sharestate.ErrNone)
	old := broker1.SharePartition(key)

	// Broker 2 takes over: its first fetch Reads with leader epoch 2 and delivers 12-19 again.
	wantOffsets(t, "broker 2's first fetch", d.fetchOK(broker2, group, "c2", 30), 12, 29)
	res := d.ack(broker1, group, "c1", 12, 19, leader.AckAccept)
	expectCode(t, "broker 1 after the takeover", res, sharestate.ErrNotLeaderOrFollower)
	if old.State() != leader.PartitionFenced || broker1.SharePartition(key) != nil {
		t.Fatalf("broker 1's share-partition is %s and cached: %v", old.State(), broker1.SharePartition(key) != nil)
	}
	if s := summary(t, p1, group, 0); s.StartOffset != 12 || s.LeaderEpoch != 2 {
		t.Fatalf("after broker 1's fenced write: %+v", s)
	}
	code, _ := d.fetch(broker1, group, "c1", 30)
	if code != sharestate.ErrNotLeaderOrFollower || broker1.SharePartition(key) != nil {
		t.Fatalf("broker 1 reloading at the old leader epoch: %s", code)
	}

	expectCode(t, "broker 2 accepts 12-19", d.ack(broker2, group, "c2", 12, 19, leader.AckAccept), sharestate.ErrNone)
	expectCode(t, "broker 2 releases 25", d.ack(broker2, group, "c2", 25, 25, leader.AckRelease), sharestate.ErrNone)
	fenceStateEpoch(t, ns, group)

	// Broker 2's state epoch is fenced: its acknowledgement is refused, its share-partition dropped.
	fenced := broker2.SharePartition(key)
	expectCode(t, "broker 2 after the fence", d.ack(broker2, group, "c2", 20, 24, leader.AckAccept), sharestate.ErrNotLeaderOrFollower)
	if fenced.State() != leader.PartitionFenced || broker2.SharePartition(key) != nil {
		t.Fatalf("broker 2's share-partition is %s", fenced.State())
	}
	// The next fetch reloads at state epoch 2 and delivers what was not completed.
	wantOffsets(t, "after the reload", d.fetchOK(broker2, group, "c3", 30), 20, 29)
	if sp := broker2.SharePartition(key); sp.StateEpoch() != 2 || sp.LeaderEpoch() != 2 {
		t.Fatalf("reloaded at epochs %d/%d", sp.StateEpoch(), sp.LeaderEpoch())
	}
	expectCode(t, "broker 2 accepts 20-29", d.ack(broker2, group, "c3", 20, 29, leader.AckAccept), sharestate.ErrNone)

	s := summary(t, p2, group, 0)
	if s.StartOffset != 30 || s.StateEpoch != 2 || s.LeaderEpoch != 2 || s.DeliveryCompleteCount != 0 {
		t.Fatalf("final state %+v", s)
	}
	for off := range int64(30) {
		want := 1
		if off >= 12 {
			want = 2 // not completed at a failover: delivered again
		}
		if d.delivered[off] != want || !d.done[off] {
			t.Fatalf("offset %d: delivered %d times (want %d), done %v", off, d.delivered[off], want, d.done[off])
		}
	}
}

// fenceStateEpoch does what the operator's fence does: it raises the state epoch and clears the
// leader, in one status update.
func fenceStateEpoch(t *testing.T, ns, group string) {
	t.Helper()
	obj := getObject(t, ns, group, 0)
	obj.Status.StateEpoch++
	obj.Status.Leader = nil
	if err := env.Client.Status().Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}
