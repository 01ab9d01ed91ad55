package leader

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// Unit tests of the SharePartition against fakeStore: one test per row of semantics §8, named after it.

var splTopic = sharestate.TopicID{9, 9, 9}

const acqd = sharestate.DeliveryStateAcquired

func splKey(partition int32) SharePartitionKey {
	return SharePartitionKey{GroupID: "g", TopicID: splTopic, Partition: partition}
}

// splOptions are the options of the tests: no retries unless a test wants them, a fake clock.
func splOptions(clock *fakeClock) SharePartitionOptions {
	return SharePartitionOptions{MaxRecordLocks: 100, Retry: NoRetry, Now: clock.Now}
}

func newSP(t *testing.T, store sharestate.Store, key SharePartitionKey, leaderEpoch int32, opts SharePartitionOptions) *SharePartition {
	t.Helper()
	sp, err := NewSharePartition(key, leaderEpoch, store, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// activeSP returns an ACTIVE share-partition on a state initialized at state epoch 1, start 0.
func activeSP(t *testing.T, store *fakeStore, key SharePartitionKey, leaderEpoch int32, opts SharePartitionOptions) *SharePartition {
	t.Helper()
	store.setup(t, key, 1, 0)
	sp := newSP(t, store, key, leaderEpoch, opts)
	if err := sp.Initialize(context.Background(), 0, 1000); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return sp
}

func codeOf(err error) sharestate.ErrorCode {
	if err == nil {
		return sharestate.ErrNone
	}
	var perr *PartitionError
	if errors.As(err, &perr) {
		return perr.Code
	}
	return sharestate.ErrUnknownServerError
}

func wantCode(t *testing.T, what string, err error, want sharestate.ErrorCode) {
	t.Helper()
	if got := codeOf(err); got != want {
		t.Fatalf("%s: got %s (%v), want %s", what, got.String(), err, want.String())
	}
}

func acquire(t *testing.T, sp *SharePartition, member string, logEnd int64, n int) []AcquiredRecords {
	t.Helper()
	recs, err := sp.Acquire(member, logEnd, n)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	return recs
}

func ack(first, last int64, typ AckType) AckBatch {
	return AckBatch{FirstOffset: first, LastOffset: last, Type: typ}
}

func wantRecords(t *testing.T, what string, sp *SharePartition, want ...sharestate.StateBatch) {
	t.Helper()
	if got := sp.Records(); !slices.Equal(got, want) {
		t.Fatalf("%s: records %v, want %v", what, got, want)
	}
}

func wantAcquired(t *testing.T, what string, got []AcquiredRecords, want ...AcquiredRecords) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: acquired %+v, want %+v", what, got, want)
	}
}

func lastWrite(t *testing.T, store *fakeStore, key SharePartitionKey) sharestate.WritePartition {
	t.Helper()
	ws := store.callsOf("write", key)
	if len(ws) == 0 {
		t.Fatal("no write")
	}
	return ws[len(ws)-1].write
}

// §8 states: EMPTY → INITIALIZING (first use: Read with its leader epoch) → ACTIVE. Acquisition and
// the fetch lock are refused until ACTIVE; callers that arrive during the Read wait for it.
func TestSharePartitionLifecycle(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	store.setup(t, key, 1, 0)
	sp := newSP(t, store, key, 3, splOptions(newFakeClock()))
	if sp.State() != PartitionEmpty {
		t.Fatalf("new share-partition is %s", sp.State())
	}
	_, err := sp.Acquire("m", 10, 10)
	wantCode(t, "acquire while EMPTY", err, sharestate.ErrLeaderNotAvailable)
	if ok, err := sp.TryFetchLock(); ok || err == nil {
		t.Fatal("fetch lock taken while EMPTY")
	}

	entered, release := make(chan struct{}), make(chan struct{})
	store.hook("read", key, func() { close(entered); <-release })
	first := make(chan error)
	go func() { first <- sp.Initialize(context.Background(), 0, 10) }()
	<-entered
	if sp.State() != PartitionInitializing {
		t.Fatalf("during the Read: %s", sp.State())
	}
	_, err = sp.Acquire("m", 10, 10)
	wantCode(t, "acquire while INITIALIZING", err, sharestate.ErrLeaderNotAvailable)
	if ok, _ := sp.TryFetchLock(); ok {
		t.Fatal("fetch lock taken while INITIALIZING")
	}
	second := make(chan error)
	go func() { second <- sp.Initialize(context.Background(), 0, 10) }()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	wantCode(t, "a waiter whose context ends", sp.Initialize(ctx, 0, 10), sharestate.ErrLeaderNotAvailable)
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	if sp.State() != PartitionActive || len(store.callsOf("read", key)) != 1 {
		t.Fatalf("after the Read: %s after %d reads, want ACTIVE after 1", sp.State(), len(store.callsOf("read", key)))
	}
	if ok, err := sp.TryFetchLock(); !ok || err != nil {
		t.Fatalf("fetch lock while ACTIVE: %v %v", ok, err)
	}
	if ok, _ := sp.TryFetchLock(); ok {
		t.Fatal("fetch lock taken twice")
	}
	sp.ReleaseFetchLock()
	wantAcquired(t, "acquire while ACTIVE", acquire(t, sp, "m", 2, 10), AcquiredRecords{0, 1, 1})
}

// §8 states: INITIALIZING → FAILED on a read error or invalid stored batches; any state → FENCED
// (semantics §8's persister error mapping on Read). A FAILED or FENCED share-partition hands out nothing.
func TestSharePartitionInitializeFailures(t *testing.T) {
	tests := []struct {
		name       string
		prepare    func(s *fakeStore, key SharePartitionKey)
		wantState  PartitionState
		wantCode   sharestate.ErrorCode
		wantReads  int
		retryCalls int
	}{
		{"never initialized: INVALID_REQUEST", func(s *fakeStore, k SharePartitionKey) { delete(s.states, k) }, PartitionFailed, sharestate.ErrUnknownServerError, 1, 0},
		{"newer leader: FENCED_LEADER_EPOCH", func(s *fakeStore, k SharePartitionKey) { s.fenceLeaderEpoch(k, 6) }, PartitionFenced, sharestate.ErrNotLeaderOrFollower, 1, 0},
		{"FENCED_STATE_EPOCH", func(s *fakeStore, k SharePartitionKey) { s.force("read", k, sharestate.ErrFencedStateEpoch) }, PartitionFenced, sharestate.ErrNotLeaderOrFollower, 1, 0},
		{"unknown partition", func(s *fakeStore, k SharePartitionKey) { s.unknown[k] = true }, PartitionFenced, sharestate.ErrUnknownTopicOrPartition, 1, 0},
		{"GROUP_ID_NOT_FOUND", func(s *fakeStore, k SharePartitionKey) { s.force("read", k, sharestate.ErrGroupIDNotFound) }, PartitionFenced, sharestate.ErrGroupIDNotFound, 1, 0},
		{"unknown server error", func(s *fakeStore, k SharePartitionKey) { s.force("read", k, sharestate.ErrUnknownServerError) }, PartitionFailed, sharestate.ErrUnknownServerError, 1, 0},
		{"coordinator unavailable, retries exhausted", func(s *fakeStore, k SharePartitionKey) {
			s.force("read", k, sharestate.ErrCoordinatorNotAvailable, sharestate.ErrNotCoordinator, sharestate.ErrCoordinatorLoadInProgress)
		}, PartitionFailed, sharestate.ErrCoordinatorLoadInProgress, 3, 3},
		{"batch below the start offset", func(s *fakeStore, k SharePartitionKey) {
			s.plant(k, sharestate.State{StateEpoch: 1, StartOffset: 10, Batches: []sharestate.StateBatch{sb(5, 12, acked, 1)}})
		}, PartitionFailed, sharestate.ErrUnknownServerError, 1, 0},
		{"batch ending before it begins", func(s *fakeStore, k SharePartitionKey) {
			s.plant(k, sharestate.State{StateEpoch: 1, StartOffset: 0, Batches: []sharestate.StateBatch{sb(12, 5, acked, 1)}})
		}, PartitionFailed, sharestate.ErrUnknownServerError, 1, 0},
		{"overlapping batches", func(s *fakeStore, k SharePartitionKey) {
			s.plant(k, sharestate.State{StateEpoch: 1, StartOffset: 0, Batches: []sharestate.StateBatch{sb(0, 5, acked, 1), sb(5, 6, avail, 1)}})
		}, PartitionFailed, sharestate.ErrUnknownServerError, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, key := newFakeStore(), splKey(0)
			store.setup(t, key, 1, 0)
			tt.prepare(store, key)
			opts := splOptions(newFakeClock())
			if tt.retryCalls > 0 {
				opts.Retry = func(calls int) (time.Duration, bool) { return 0, calls < tt.retryCalls }
			}
			sp := newSP(t, store, key, 5, opts)
			wantCode(t, "initialize", sp.Initialize(context.Background(), 0, 10), tt.wantCode)
			if sp.State() != tt.wantState {
				t.Fatalf("state %s, want %s", sp.State(), tt.wantState)
			}
			if n := len(store.callsOf("read", key)); n != tt.wantReads {
				t.Fatalf("%d reads, want %d", n, tt.wantReads)
			}
			recs, err := sp.Acquire("m", 10, 10)
			if recs != nil {
				t.Fatalf("a %s share-partition handed out %v", sp.State(), recs)
			}
			wantCode(t, "acquire", err, tt.wantCode)
			if ok, _ := sp.TryFetchLock(); ok {
				t.Fatal("fetch lock taken")
			}
			wantCode(t, "initialize again", sp.Initialize(context.Background(), 0, 10), tt.wantCode)
		})
	}
}

// §8: the leader epoch is fixed at creation and sent in every Read and Write; the state epoch from
// the Read is sent in every Write, whichever path writes.
func TestSharePartitionEpochsOnEveryCall(t *testing.T) {
	store, key, clock := newFakeStore(), splKey(0), newFakeClock()
	store.setup(t, key, 4, 0)
	sp := newSP(t, store, key, 7, splOptions(clock))
	if err := sp.Initialize(context.Background(), 0, 100); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acquire(t, sp, "a", 30, 10)
	acquire(t, sp, "b", 30, 10)
	acquire(t, sp, "c", 30, 10)
	if err := sp.Acknowledge(ctx, "a", []AckBatch{ack(0, 9, AckAccept)}); err != nil {
		t.Fatal(err)
	}
	if err := sp.Release(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if n := sp.ExpireLocks(ctx, clock.Now()); n != 10 {
		t.Fatalf("expired %d, want 10", n)
	}
	reads, writes := store.callsOf("read", key), store.callsOf("write", key)
	if len(reads) != 1 || reads[0].leaderEpoch != 7 {
		t.Fatalf("reads %+v, want one with leader epoch 7", reads)
	}
	if len(writes) != 3 {
		t.Fatalf("%d writes, want 3 (acknowledge, release, lock timeout)", len(writes))
	}
	for i, w := range writes {
		if w.write.LeaderEpoch != 7 || w.write.StateEpoch != 4 || w.code != sharestate.ErrNone {
			t.Fatalf("write %d: leader epoch %d, state epoch %d, answer %s; want 7, 4, NONE", i, w.write.LeaderEpoch, w.write.StateEpoch, w.code)
		}
	}
	if sp.LeaderEpoch() != 7 || sp.StateEpoch() != 4 {
		t.Fatalf("epochs %d/%d", sp.LeaderEpoch(), sp.StateEpoch())
	}
}

// §8 (and §3): the coordinator codes are retried with the policy; the operation then succeeds and
// nothing is fenced.
func TestSharePartitionRetriesCoordinatorErrors(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	store.setup(t, key, 1, 0)
	store.force("read", key, sharestate.ErrCoordinatorLoadInProgress, sharestate.ErrNotCoordinator)
	opts := splOptions(newFakeClock())
	var asked []int
	opts.Retry = func(calls int) (time.Duration, bool) {
		asked = append(asked, calls)
		return time.Millisecond, calls < 5
	}
	sp := newSP(t, store, key, 1, opts)
	if err := sp.Initialize(context.Background(), 0, 10); err != nil {
		t.Fatal(err)
	}
	acquire(t, sp, "m", 10, 10)
	store.force("write", key, sharestate.ErrCoordinatorNotAvailable)
	if err := sp.Acknowledge(context.Background(), "m", []AckBatch{ack(0, 9, AckAccept)}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(asked, []int{1, 2, 1}) {
		t.Fatalf("policy asked after %v calls", asked)
	}
	if n, w := len(store.callsOf("read", key)), len(store.callsOf("write", key)); n != 3 || w != 2 {
		t.Fatalf("%d reads and %d writes, want 3 and 2", n, w)
	}
	if st := store.state(t, key); st.StartOffset != 10 || sp.State() != PartitionActive {
		t.Fatalf("stored start %d, state %s", st.StartOffset, sp.State())
	}
}

// §8: a FENCED share-partition hands out nothing and accepts nothing, whatever fenced it.
func TestSharePartitionFencedHandsOutNothing(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	sp := activeSP(t, store, key, 1, splOptions(newFakeClock()))
	acquire(t, sp, "m", 20, 10)
	store.fenceStateEpoch(key)
	wantCode(t, "acknowledge after the fence", sp.Acknowledge(context.Background(), "m", []AckBatch{ack(0, 4, AckAccept)}), sharestate.ErrNotLeaderOrFollower)
	if sp.State() != PartitionFenced {
		t.Fatalf("state %s", sp.State())
	}
	recs, err := sp.Acquire("m", 20, 10)
	if recs != nil || codeOf(err) != sharestate.ErrNotLeaderOrFollower {
		t.Fatalf("a fenced share-partition acquired %v, %v", recs, err)
	}
	wantCode(t, "release", sp.Release(context.Background(), "m"), sharestate.ErrNotLeaderOrFollower)
	if n := sp.ExpireLocks(context.Background(), time.Now().Add(time.Hour)); n != 0 {
		t.Fatalf("a fenced share-partition expired %d locks", n)
	}
	if len(store.callsOf("write", key)) != 1 {
		t.Fatal("a fenced share-partition kept writing")
	}

	sp2 := activeSP(t, newFakeStore(), key, 1, splOptions(newFakeClock()))
	sp2.MarkFenced()
	if _, err := sp2.Acquire("m", 20, 10); codeOf(err) != sharestate.ErrNotLeaderOrFollower {
		t.Fatalf("after MarkFenced: %v", err)
	}
}

// §8: acquisition hands out AVAILABLE records from the start offset, below the log end, within the
// in-flight window, raising each delivery count; stored counts carry on; done records never return.
func TestSharePartitionAcquire(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	store.plant(key, sharestate.State{StateEpoch: 1, StartOffset: 100, DeliveryCompleteCount: -1, Batches: []sharestate.StateBatch{
		sb(100, 101, acked, 1), sb(102, 103, avail, 2), sb(106, 106, archd, 3), sb(107, 108, avail, 1),
	}})
	sp := newSP(t, store, key, 1, splOptions(newFakeClock()))
	if err := sp.Initialize(context.Background(), 0, 0); err != nil {
		t.Fatal(err)
	}
	if sp.StartOffset() != 102 {
		t.Fatalf("start offset %d: the acknowledged prefix is done", sp.StartOffset())
	}
	wantAcquired(t, "the stored records first, up to max", acquire(t, sp, "a", 1000, 5),
		AcquiredRecords{102, 103, 3}, AcquiredRecords{104, 105, 1}, AcquiredRecords{107, 107, 2})
	wantAcquired(t, "then the rest, below the log end", acquire(t, sp, "b", 110, 50),
		AcquiredRecords{108, 108, 2}, AcquiredRecords{109, 109, 1})
	wantAcquired(t, "nothing left below the log end", acquire(t, sp, "c", 110, 50))
	// The window is 100 records from the start offset 102: offsets up to 201.
	recs := acquire(t, sp, "c", 10000, 1000)
	wantAcquired(t, "up to the in-flight window", recs, AcquiredRecords{110, 201, 1})
	wantAcquired(t, "the window is full", acquire(t, sp, "c", 10000, 1000))
	if recs, _ := sp.Acquire("c", 10000, 0); recs != nil {
		t.Fatal("zero records asked, some acquired")
	}
	_, err := sp.Acquire("", 10000, 10)
	wantCode(t, "no member", err, sharestate.ErrInvalidRequest)
	// Acknowledging the head moves the start offset, and the window with it.
	if err := sp.Acknowledge(context.Background(), "a", []AckBatch{ack(102, 105, AckAccept), ack(107, 107, AckAccept)}); err != nil {
		t.Fatal(err)
	}
	if sp.StartOffset() != 108 {
		t.Fatalf("start offset %d, want 108", sp.StartOffset())
	}
	wantAcquired(t, "the window moved", acquire(t, sp, "c", 10000, 1000), AcquiredRecords{202, 207, 1})
}

// §8 acknowledge types: ACCEPT → ACKNOWLEDGED (2), RELEASE → AVAILABLE (0), REJECT → ARCHIVED (4),
// a gap → ARCHIVED; the Write carries exactly the changed records, the advanced start offset and the
// delivery-complete count.
func TestSharePartitionAcknowledgeTypes(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	sp := activeSP(t, store, key, 1, splOptions(newFakeClock()))
	acquire(t, sp, "m", 12, 12)
	err := sp.Acknowledge(context.Background(), "m", []AckBatch{
		ack(0, 1, AckAccept), ack(2, 3, AckRelease), ack(4, 5, AckReject), ack(6, 6, AckGap), ack(7, 7, AckAccept),
	})
	if err != nil {
		t.Fatal(err)
	}
	w := lastWrite(t, store, key)
	wantBatches := []sharestate.StateBatch{sb(0, 1, acked, 1), sb(2, 3, avail, 1), sb(4, 6, archd, 1), sb(7, 7, acked, 1)}
	if !slices.Equal(w.StateBatches, wantBatches) || w.StartOffset != 2 || w.DeliveryCompleteCount != 4 {
		t.Fatalf("write %+v, want batches %v, start 2, complete count 4", w, wantBatches)
	}
	wantRecords(t, "in memory", sp, sb(2, 3, avail, 1), sb(4, 6, archd, 1), sb(7, 7, acked, 1), sb(8, 11, acqd, 1))
}
