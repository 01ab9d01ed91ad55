package leader

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// Unit tests of the Manager against fakeStore: the per-partition rows of semantics §8.

// leaders is the test's view of partition leadership: each partition's leader epoch (def unless
// set), or not led.
type leaders struct {
	mu       sync.Mutex
	def      int32
	epochs   map[int32]int32
	notLeads map[int32]bool
}

func newLeaders(epoch int32) *leaders {
	return &leaders{def: epoch, epochs: map[int32]int32{}, notLeads: map[int32]bool{}}
}

func (l *leaders) set(partition, epoch int32, leads bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.epochs[partition], l.notLeads[partition] = epoch, !leads
}

func (l *leaders) get(_ sharestate.TopicID, partition int32) (int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	epoch, ok := l.epochs[partition]
	if !ok {
		epoch = l.def
	}
	return epoch, !l.notLeads[partition]
}

func newTestManager(t *testing.T, store sharestate.Store, l *leaders, clock *fakeClock) *Manager {
	t.Helper()
	m, err := NewManager(ManagerOptions{Store: store, LeaderEpoch: l.get, Partition: splOptions(clock)})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fetchOf(partitions ...int32) sharestate.Request[FetchPartition] {
	req := sharestate.Request[FetchPartition]{GroupID: "g", Topics: []sharestate.TopicData[FetchPartition]{{TopicID: splTopic}}}
	for _, p := range partitions {
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, FetchPartition{Partition: p, LogEndOffset: 10, MaxRecords: 100})
	}
	return req
}

func acknowledgeOf(batches []AckBatch, partitions ...int32) sharestate.Request[AcknowledgePartition] {
	req := sharestate.Request[AcknowledgePartition]{GroupID: "g", Topics: []sharestate.TopicData[AcknowledgePartition]{{TopicID: splTopic}}}
	for _, p := range partitions {
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, AcknowledgePartition{Partition: p, Batches: batches})
	}
	return req
}

func releaseOf(partitions ...int32) sharestate.Request[ReleasePartition] {
	req := sharestate.Request[ReleasePartition]{GroupID: "g", Topics: []sharestate.TopicData[ReleasePartition]{{TopicID: splTopic}}}
	for _, p := range partitions {
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, ReleasePartition{Partition: p})
	}
	return req
}

// codes returns a response's codes by partition.
func codes[R any](resp sharestate.Response[R], result func(R) sharestate.PartitionResult) map[int32]sharestate.ErrorCode {
	out := map[int32]sharestate.ErrorCode{}
	for _, t := range resp.Topics {
		for _, r := range t.Partitions {
			pr := result(r)
			out[pr.Partition] = pr.ErrorCode
		}
	}
	return out
}

func fetchCodes(resp sharestate.Response[FetchResult]) map[int32]sharestate.ErrorCode {
	return codes(resp, func(r FetchResult) sharestate.PartitionResult { return r.PartitionResult })
}

func plainCodes(resp sharestate.Response[sharestate.PartitionResult]) map[int32]sharestate.ErrorCode {
	return codes(resp, func(r sharestate.PartitionResult) sharestate.PartitionResult { return r })
}

func wantCodes(t *testing.T, what string, got, want map[int32]sharestate.ErrorCode) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: codes %v, want %v", what, got, want)
	}
}

// fetched returns what a fetch response acquired, by partition.
func fetched(resp sharestate.Response[FetchResult]) map[int32][]AcquiredRecords {
	out := map[int32][]AcquiredRecords{}
	for _, r := range resp.Topics[0].Partitions {
		out[r.Partition] = r.Records
	}
	return out
}

// §8: errors are per partition: in a request for 5 partitions where 3 are fenced, the other 2
// proceed. The fenced ones answer NOT_LEADER_OR_FOLLOWER, are FENCED and removed from the cache;
// the next fetch creates them anew, Reading the current epochs (or being fenced again).
func TestManagerFiveOfWhichThreeFenced(t *testing.T) {
	store, l := newFakeStore(), newLeaders(1)
	m := newTestManager(t, store, l, newFakeClock())
	ctx := context.Background()
	for p := range int32(5) {
		store.setup(t, splKey(p), 1, 0)
	}
	all := []int32{0, 1, 2, 3, 4}
	wantCodes(t, "first fetch", fetchCodes(m.Fetch(ctx, "m", fetchOf(all...))), map[int32]sharestate.ErrorCode{0: 0, 1: 0, 2: 0, 3: 0, 4: 0})
	old := map[int32]*SharePartition{}
	for _, p := range all {
		old[p] = m.SharePartition(splKey(p))
	}

	store.fenceStateEpoch(splKey(0))     // the operator fenced it
	store.fenceLeaderEpoch(splKey(2), 5) // a newer leader Read it
	store.fenceStateEpoch(splKey(4))
	resp := m.Acknowledge(ctx, "m", acknowledgeOf([]AckBatch{ack(0, 4, AckAccept)}, all...))
	nl := sharestate.ErrNotLeaderOrFollower
	wantCodes(t, "acknowledge", plainCodes(resp), map[int32]sharestate.ErrorCode{0: nl, 1: 0, 2: nl, 3: 0, 4: nl})
	for _, p := range all {
		fenced := p%2 == 0
		if cached := m.SharePartition(splKey(p)); (cached == nil) != fenced || (old[p].State() == PartitionFenced) != fenced {
			t.Fatalf("partition %d: cached %v, state %s", p, cached != nil, old[p].State())
		}
		want := int64(5)
		if fenced {
			want = 0 // the fenced writes changed nothing
		}
		if start := store.state(t, splKey(p)).StartOffset; start != want {
			t.Fatalf("partition %d: stored start offset %d, want %d", p, start, want)
		}
	}

	resp2 := m.Fetch(ctx, "m", fetchOf(all...))
	wantCodes(t, "fetch after the fence", fetchCodes(resp2), map[int32]sharestate.ErrorCode{0: 0, 1: 0, 2: nl, 3: 0, 4: 0})
	got := fetched(resp2)
	for _, p := range []int32{0, 4} {
		wantAcquired(t, fmt.Sprintf("partition %d redelivers what it never stored", p), got[p], AcquiredRecords{0, 9, 1})
		if sp := m.SharePartition(splKey(p)); sp == nil || sp == old[p] || sp.StateEpoch() != 2 {
			t.Fatalf("partition %d was not reloaded at state epoch 2", p)
		}
		if n := len(store.callsOf("read", splKey(p))); n != 2 {
			t.Fatalf("partition %d: %d reads, want 2", p, n)
		}
	}
	if m.SharePartition(splKey(2)) != nil {
		t.Fatal("partition 2's leader epoch is still older than the stored one; it stays out")
	}
	wantAcquired(t, "partition 1 holds its records", got[1])
	wantCodes(t, "acknowledge the reloaded ones", plainCodes(m.Acknowledge(ctx, "m", acknowledgeOf([]AckBatch{ack(0, 9, AckAccept)}, 0, 4))),
		map[int32]sharestate.ErrorCode{0: 0, 4: 0})
	if w := lastWrite(t, store, splKey(0)); w.StateEpoch != 2 || w.LeaderEpoch != 1 {
		t.Fatalf("the reloaded share-partition wrote epochs %d/%d", w.StateEpoch, w.LeaderEpoch)
	}
}

// §8: every persister code, on a Write and on a Read, maps to the client's code; fencing codes and
// unknown topic or group fence and remove the share-partition; coordinator codes are retried and do
// not fence; the rest is UNKNOWN_SERVER_ERROR. All in one request, one code per partition.
func TestManagerPersisterErrorMapping(t *testing.T) {
	rows := []struct {
		persister sharestate.ErrorCode
		client    sharestate.ErrorCode
		fenced    bool
	}{
		{sharestate.ErrFencedLeaderEpoch, sharestate.ErrNotLeaderOrFollower, true},
		{sharestate.ErrFencedStateEpoch, sharestate.ErrNotLeaderOrFollower, true},
		{sharestate.ErrUnknownTopicOrPartition, sharestate.ErrUnknownTopicOrPartition, true},
		{sharestate.ErrGroupIDNotFound, sharestate.ErrGroupIDNotFound, true},
		{sharestate.ErrNotCoordinator, sharestate.ErrNotCoordinator, false},
		{sharestate.ErrCoordinatorNotAvailable, sharestate.ErrCoordinatorNotAvailable, false},
		{sharestate.ErrCoordinatorLoadInProgress, sharestate.ErrCoordinatorLoadInProgress, false},
		{sharestate.ErrInvalidRequest, sharestate.ErrUnknownServerError, false},
		{sharestate.ErrUnknownServerError, sharestate.ErrUnknownServerError, false},
		{sharestate.ErrUnsupportedVersion, sharestate.ErrUnknownServerError, false},
		{sharestate.ErrNone, sharestate.ErrNone, false},
	}
	for _, op := range []string{"write", "read"} {
		t.Run(op, func(t *testing.T) {
			store, l := newFakeStore(), newLeaders(1)
			opts := splOptions(newFakeClock())
			opts.Retry = func(calls int) (time.Duration, bool) { return 0, calls < 3 }
			m, err := NewManager(ManagerOptions{Store: store, LeaderEpoch: l.get, Partition: opts})
			if err != nil {
				t.Fatal(err)
			}
			var parts []int32
			want := map[int32]sharestate.ErrorCode{}
			for i, r := range rows {
				p := int32(i)
				parts = append(parts, p)
				store.setup(t, splKey(p), 1, 0)
				want[p] = r.client
			}
			var got map[int32]sharestate.ErrorCode
			if op == "write" {
				wantCodes(t, "fetch", fetchCodes(m.Fetch(context.Background(), "m", fetchOf(parts...))), map[int32]sharestate.ErrorCode{0: 0, 1: 0, 2: 0, 3: 0, 4: 0, 5: 0, 6: 0, 7: 0, 8: 0, 9: 0, 10: 0})
			}
			for i, r := range rows {
				if r.persister != sharestate.ErrNone {
					// A retriable code keeps being answered, so the retries run out.
					store.force(op, splKey(int32(i)), r.persister, r.persister, r.persister)
				}
			}
			if op == "write" {
				got = plainCodes(m.Acknowledge(context.Background(), "m", acknowledgeOf([]AckBatch{ack(0, 4, AckAccept)}, parts...)))
			} else {
				got = fetchCodes(m.Fetch(context.Background(), "m", fetchOf(parts...)))
			}
			wantCodes(t, "answers", got, want)
			for i, r := range rows {
				p := int32(i)
				calls := len(store.callsOf(op, splKey(p)))
				if wantCalls := map[bool]int{true: 3, false: 1}[r.persister.Retriable()]; calls != wantCalls {
					t.Fatalf("%s: %d calls, want %d", r.persister, calls, wantCalls)
				}
				checkAfterError(t, m, op, r.persister, r.fenced, p)
			}
		})
	}
}

// checkAfterError checks what became of a share-partition whose persister call was answered code:
// fenced ones are FENCED and gone; on a Write, others stay cached and ACTIVE; on a Read, others
// FAILED to load, which drops them too, without fencing them.
func checkAfterError(t *testing.T, m *Manager, op string, code sharestate.ErrorCode, fenced bool, p int32) {
	t.Helper()
	cached := m.SharePartition(splKey(p))
	switch {
	case code == sharestate.ErrNone:
		if cached == nil || cached.State() != PartitionActive {
			t.Fatalf("partition %d (no error) is not ACTIVE", p)
		}
	case fenced || op == "read":
		if cached != nil {
			t.Fatalf("%s on %s: still cached as %s", code, op, cached.State())
		}
	default:
		if cached == nil || cached.State() != PartitionActive {
			t.Fatalf("%s on %s: not kept ACTIVE", code, op)
		}
		wantRecords(t, fmt.Sprintf("%s rolled back", code), cached, sb(0, 9, acqd, 1))
	}
}

// A share-partition is tied to its leader epoch: when the broker's view of the partition's leader
// epoch changes, the cached one is fenced and a new one Reads with the new epoch; when the broker
// no longer leads the partition, requests answer NOT_LEADER_OR_FOLLOWER.
func TestManagerLeaderEpochChanges(t *testing.T) {
	store, l := newFakeStore(), newLeaders(1)
	m := newTestManager(t, store, l, newFakeClock())
	ctx := context.Background()
	key := splKey(0)
	store.setup(t, key, 1, 0)
	m.Fetch(ctx, "m", fetchOf(0))
	first := m.SharePartition(key)
	l.set(0, 2, true)
	resp := m.Fetch(ctx, "m", fetchOf(0))
	wantAcquired(t, "the new share-partition redelivers", fetched(resp)[0], AcquiredRecords{0, 9, 1})
	if first.State() != PartitionFenced || m.SharePartition(key).LeaderEpoch() != 2 {
		t.Fatalf("old %s, new at epoch %d", first.State(), m.SharePartition(key).LeaderEpoch())
	}
	if reads := store.callsOf("read", key); len(reads) != 2 || reads[1].leaderEpoch != 2 {
		t.Fatalf("reads %+v", reads)
	}
	wantCode(t, "the old one cannot write", first.Acknowledge(ctx, "m", []AckBatch{ack(0, 0, AckAccept)}), sharestate.ErrNotLeaderOrFollower)

	l.set(0, 2, false)
	nl := sharestate.ErrNotLeaderOrFollower
	wantCodes(t, "fetch, not the leader", fetchCodes(m.Fetch(ctx, "m", fetchOf(0))), map[int32]sharestate.ErrorCode{0: nl})
	if m.SharePartition(key) != nil {
		t.Fatal("a partition this broker does not lead is still cached")
	}
	wantCodes(t, "acknowledge, not the leader", plainCodes(m.Acknowledge(ctx, "m", acknowledgeOf([]AckBatch{ack(0, 0, AckAccept)}, 0))), map[int32]sharestate.ErrorCode{0: nl})
}

// Acknowledge and release never load a share-partition: one that is not cached answers
// UNKNOWN_TOPIC_OR_PARTITION (its records came from one that is gone). Bad keys are INVALID_REQUEST.
func TestManagerRequestsWithoutSharePartition(t *testing.T) {
	store, l := newFakeStore(), newLeaders(1)
	m := newTestManager(t, store, l, newFakeClock())
	ctx := context.Background()
	u := sharestate.ErrUnknownTopicOrPartition
	wantCodes(t, "acknowledge", plainCodes(m.Acknowledge(ctx, "m", acknowledgeOf([]AckBatch{ack(0, 0, AckAccept)}, 0, 1))), map[int32]sharestate.ErrorCode{0: u, 1: u})
	wantCodes(t, "release", plainCodes(m.Release(ctx, "m", releaseOf(0))), map[int32]sharestate.ErrorCode{0: u})
	if len(store.calls) != 0 {
		t.Fatalf("the store was called: %+v", store.calls)
	}
	bad := fetchOf(-1)
	bad.GroupID = ""
	wantCodes(t, "no group", fetchCodes(m.Fetch(ctx, "m", bad)), map[int32]sharestate.ErrorCode{-1: sharestate.ErrInvalidRequest})
	bad.GroupID = "g"
	wantCodes(t, "negative partition", fetchCodes(m.Fetch(ctx, "m", bad)), map[int32]sharestate.ErrorCode{-1: sharestate.ErrInvalidRequest})
}

// Release and lock expiry through the manager, over several partitions; Run expires locks on its
// own; a fetch finding the fetch lock taken gets nothing, without an error.
func TestManagerReleaseExpireAndFetchLock(t *testing.T) {
	store, l, clock := newFakeStore(), newLeaders(1), newFakeClock()
	m, err := NewManager(ManagerOptions{Store: store, LeaderEpoch: l.get, Partition: splOptions(clock), ExpiryInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for p := range int32(3) {
		store.setup(t, splKey(p), 1, 0)
	}
	m.Fetch(ctx, "m", fetchOf(0, 1, 2))
	wantCodes(t, "release", plainCodes(m.Release(ctx, "m", releaseOf(0))), map[int32]sharestate.ErrorCode{0: 0})
	wantRecords(t, "released", m.SharePartition(splKey(0)), sb(0, 9, avail, 1))

	sp := m.SharePartition(splKey(1))
	if ok, err := sp.TryFetchLock(); !ok || err != nil {
		t.Fatal("fetch lock")
	}
	resp := m.Fetch(ctx, "n", fetchOf(0, 1))
	wantCodes(t, "fetch", fetchCodes(resp), map[int32]sharestate.ErrorCode{0: 0, 1: 0})
	wantAcquired(t, "partition 0", fetched(resp)[0], AcquiredRecords{0, 9, 2})
	wantAcquired(t, "partition 1, fetch lock taken", fetched(resp)[1])
	sp.ReleaseFetchLock()

	if n := m.ExpireLocks(ctx); n != 0 {
		t.Fatalf("expired %d too early", n)
	}
	clock.Advance(time.Minute)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { m.Run(runCtx); close(done) }()
	expired := func() bool {
		return len(store.callsOf("write", splKey(0))) == 2 && len(store.callsOf("write", splKey(1))) == 1 &&
			len(store.callsOf("write", splKey(2))) == 1
	}
	for deadline := time.Now().Add(5 * time.Second); !expired() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	stop()
	<-done
	for p := range int32(3) {
		wantRecords(t, fmt.Sprintf("partition %d expired", p), m.SharePartition(splKey(p)), sb(0, 9, avail, map[int32]int16{0: 2, 1: 1, 2: 1}[p]))
	}
}

// Concurrent first fetches of a partition share one Read.
func TestManagerConcurrentFirstFetch(t *testing.T) {
	store, l := newFakeStore(), newLeaders(1)
	m := newTestManager(t, store, l, newFakeClock())
	store.setup(t, splKey(0), 1, 0)
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int64]int{}
	for i := range 8 {
		wg.Go(func() {
			resp := m.Fetch(context.Background(), fmt.Sprintf("m%d", i), fetchOf(0))
			for _, r := range fetched(resp)[0] {
				mu.Lock()
				for off := r.FirstOffset; off <= r.LastOffset; off++ {
					seen[off]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := len(store.callsOf("read", splKey(0))); n != 1 {
		t.Fatalf("%d reads", n)
	}
	for off := range int64(10) {
		if seen[off] != 1 {
			t.Fatalf("offset %d delivered %d times", off, seen[off])
		}
	}
}
