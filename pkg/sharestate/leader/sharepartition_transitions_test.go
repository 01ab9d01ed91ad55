package leader

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// §8: acknowledging records the member does not hold, or a malformed acknowledgement, changes
// nothing and writes nothing.
func TestSharePartitionAcknowledgeRefused(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	sp := activeSP(t, store, key, 1, splOptions(newFakeClock()))
	acquire(t, sp, "a", 10, 5)
	acquire(t, sp, "b", 10, 5)
	tests := []struct {
		name    string
		member  string
		batches []AckBatch
		want    sharestate.ErrorCode
	}{
		{"another member's records", "a", []AckBatch{ack(3, 6, AckAccept)}, sharestate.ErrInvalidRecordState},
		{"records never acquired", "a", []AckBatch{ack(10, 12, AckAccept)}, sharestate.ErrInvalidRecordState},
		{"one bad batch spoils all", "a", []AckBatch{ack(0, 1, AckAccept), ack(7, 7, AckAccept)}, sharestate.ErrInvalidRecordState},
		{"reversed range", "a", []AckBatch{ack(3, 2, AckAccept)}, sharestate.ErrInvalidRequest},
		{"negative offset", "a", []AckBatch{ack(-1, 2, AckAccept)}, sharestate.ErrInvalidRequest},
		{"unknown type", "a", []AckBatch{ack(0, 1, 4)}, sharestate.ErrInvalidRequest},
		{"overlapping batches", "a", []AckBatch{ack(0, 2, AckAccept), ack(2, 3, AckReject)}, sharestate.ErrInvalidRequest},
	}
	for _, tt := range tests {
		wantCode(t, tt.name, sp.Acknowledge(context.Background(), tt.member, tt.batches), tt.want)
	}
	if err := sp.Acknowledge(context.Background(), "a", nil); err != nil {
		t.Fatalf("an empty acknowledgement: %v", err)
	}
	if len(store.callsOf("write", key)) != 0 {
		t.Fatal("a refused acknowledgement was written")
	}
	wantRecords(t, "unchanged", sp, sb(0, 9, acqd, 1))
	if err := sp.Acknowledge(context.Background(), "a", []AckBatch{ack(0, 4, AckAccept)}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "acknowledged twice", sp.Acknowledge(context.Background(), "a", []AckBatch{ack(0, 0, AckAccept)}), sharestate.ErrInvalidRecordState)
}

// §8: the start offset advances past the completed prefix (ACKNOWLEDGED or ARCHIVED), and every
// Write carries it, with the delivery-complete count above it.
func TestSharePartitionStartOffsetAdvance(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	sp := activeSP(t, store, key, 1, splOptions(newFakeClock()))
	ctx := context.Background()
	acquire(t, sp, "m", 20, 20)
	steps := []struct {
		batches       []AckBatch
		start         int64
		completeCount int32
	}{
		{[]AckBatch{ack(5, 9, AckAccept)}, 0, 5},
		{[]AckBatch{ack(1, 2, AckReject)}, 0, 7},
		{[]AckBatch{ack(0, 0, AckAccept)}, 3, 5},
		{[]AckBatch{ack(3, 4, AckRelease)}, 3, 5},
		{[]AckBatch{ack(10, 19, AckAccept)}, 3, 15},
	}
	for i, s := range steps {
		if err := sp.Acknowledge(ctx, "m", s.batches); err != nil {
			t.Fatal(err)
		}
		w := lastWrite(t, store, key)
		if w.StartOffset != s.start || w.DeliveryCompleteCount != s.completeCount || sp.StartOffset() != s.start {
			t.Fatalf("step %d: wrote start %d, complete count %d, in memory %d; want %d, %d", i, w.StartOffset, w.DeliveryCompleteCount, sp.StartOffset(), s.start, s.completeCount)
		}
	}
	wantAcquired(t, "the released records", acquire(t, sp, "m", 20, 20), AcquiredRecords{3, 4, 2})
	if err := sp.Acknowledge(ctx, "m", []AckBatch{ack(3, 4, AckAccept)}); err != nil {
		t.Fatal(err)
	}
	st := store.state(t, key)
	if st.StartOffset != 20 || len(st.Batches) != 0 || st.DeliveryCompleteCount != 0 || sp.StartOffset() != 20 {
		t.Fatalf("stored %+v, in memory %d: want start 20, nothing in flight", st, sp.StartOffset())
	}
	wantRecords(t, "nothing tracked", sp)
}

// §8: a failed Write on acknowledge or release rolls the in-memory transition back: the records
// return to ACQUIRED, by the same member, and the start offset stays. A fencing answer also fences.
func TestSharePartitionRollback(t *testing.T) {
	codes := []struct {
		persister sharestate.ErrorCode
		client    sharestate.ErrorCode
		state     PartitionState
	}{
		{sharestate.ErrUnknownServerError, sharestate.ErrUnknownServerError, PartitionActive},
		{sharestate.ErrInvalidRequest, sharestate.ErrUnknownServerError, PartitionActive},
		{sharestate.ErrCoordinatorNotAvailable, sharestate.ErrCoordinatorNotAvailable, PartitionActive},
		{sharestate.ErrFencedLeaderEpoch, sharestate.ErrNotLeaderOrFollower, PartitionFenced},
		{sharestate.ErrFencedStateEpoch, sharestate.ErrNotLeaderOrFollower, PartitionFenced},
	}
	ops := map[string]func(sp *SharePartition) error{
		"acknowledge": func(sp *SharePartition) error {
			return sp.Acknowledge(context.Background(), "m", []AckBatch{ack(0, 3, AckAccept), ack(4, 5, AckRelease), ack(6, 7, AckReject)})
		},
		"release": func(sp *SharePartition) error { return sp.Release(context.Background(), "m") },
	}
	for name, op := range ops {
		for _, c := range codes {
			t.Run(fmt.Sprintf("%s/%s", name, c.persister), func(t *testing.T) {
				store, key := newFakeStore(), splKey(0)
				sp := activeSP(t, store, key, 1, splOptions(newFakeClock()))
				acquire(t, sp, "m", 8, 8)
				acquire(t, sp, "n", 10, 2)
				store.force("write", key, c.persister)
				wantCode(t, name, op(sp), c.client)
				wantRecords(t, "rolled back", sp, sb(0, 9, acqd, 1))
				if sp.StartOffset() != 0 || sp.State() != c.state {
					t.Fatalf("start %d, state %s; want 0, %s", sp.StartOffset(), sp.State(), c.state)
				}
				if st := store.state(t, key); len(st.Batches) != 0 || st.StartOffset != 0 {
					t.Fatalf("the failed write changed the store: %+v", st)
				}
				if c.state != PartitionActive {
					return
				}
				// The member still holds them and can try again.
				if err := op(sp); err != nil {
					t.Fatal(err)
				}
				if len(store.state(t, key).Batches) == 0 {
					t.Fatal("the second try was not written")
				}
			})
		}
	}
}

// §8 with concurrency: records waiting for their Write are handed to nobody else; acquisition does
// not wait for the Write (no lock is held across the Store call); a failed Write gives them back to
// their member.
func TestSharePartitionPendingTransition(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	sp := activeSP(t, store, key, 1, splOptions(newFakeClock()))
	acquire(t, sp, "a", 10, 10)
	entered, release := make(chan struct{}), make(chan struct{})
	store.hook("write", key, func() { close(entered); <-release })
	store.force("write", key, sharestate.ErrUnknownServerError)
	done := make(chan error)
	go func() { done <- sp.Acknowledge(context.Background(), "a", []AckBatch{ack(0, 4, AckRelease)}) }()
	<-entered
	wantAcquired(t, "during the Write, past the pending records", acquire(t, sp, "b", 12, 100), AcquiredRecords{10, 11, 1})
	wantCode(t, "acknowledging pending records", takeAgain(sp, "a", ack(0, 0, AckAccept)), sharestate.ErrInvalidRecordState)
	wantRecords(t, "pending", sp, sb(0, 4, avail, 1), sb(5, 11, acqd, 1))
	store.hook("write", key, nil)
	close(release)
	wantCode(t, "the failed write", <-done, sharestate.ErrUnknownServerError)
	wantRecords(t, "rolled back", sp, sb(0, 11, acqd, 1))
	wantCode(t, "b does not hold a's records", sp.Acknowledge(context.Background(), "b", []AckBatch{ack(0, 0, AckAccept)}), sharestate.ErrInvalidRecordState)
	if err := sp.Acknowledge(context.Background(), "a", []AckBatch{ack(0, 9, AckAccept)}); err != nil {
		t.Fatal(err)
	}
}

// takeAgain tries to take an acknowledgement's transition without waiting for the Write in flight
// (Acknowledge itself waits for it, to keep the Writes in order).
func takeAgain(sp *SharePartition, member string, batches ...AckBatch) error {
	tx, _, err := sp.takeAcknowledge(member, batches)
	if tx != nil {
		return fmt.Errorf("pending records were taken again: %v", tx.changed)
	}
	return err
}

// §8: at the acquisition-lock timeout records return to AVAILABLE (ARCHIVED at the delivery-count
// limit). A failed Write of that is only logged: the transition stands.
func TestSharePartitionLockTimeout(t *testing.T) {
	store, key, clock := newFakeStore(), splKey(0), newFakeClock()
	var logged []string
	var logMu sync.Mutex
	opts := splOptions(clock)
	opts.Logger = funcr.New(func(_, args string) {
		logMu.Lock()
		defer logMu.Unlock()
		logged = append(logged, args)
	}, funcr.Options{})
	sp := activeSP(t, store, key, 1, opts)
	ctx := context.Background()
	acquire(t, sp, "a", 5, 5)
	clock.Advance(10 * time.Second)
	acquire(t, sp, "b", 10, 5)
	clock.Advance(20*time.Second - time.Millisecond)
	if n := sp.ExpireLocks(ctx, clock.Now()); n != 0 {
		t.Fatalf("expired %d before the lock duration", n)
	}
	clock.Advance(time.Millisecond)
	if n := sp.ExpireLocks(ctx, clock.Now()); n != 5 {
		t.Fatalf("expired %d, want a's 5", n)
	}
	if w := lastWrite(t, store, key); !slices.Equal(w.StateBatches, []sharestate.StateBatch{sb(0, 4, avail, 1)}) {
		t.Fatalf("lock timeout wrote %v", w.StateBatches)
	}
	wantRecords(t, "a's records available again", sp, sb(0, 4, avail, 1), sb(5, 9, acqd, 1))

	store.force("write", key, sharestate.ErrCoordinatorNotAvailable)
	clock.Advance(10 * time.Second)
	if n := sp.ExpireLocks(ctx, clock.Now()); n != 5 {
		t.Fatalf("expired %d, want b's 5", n)
	}
	wantRecords(t, "the transition stands after the failed write", sp, sb(0, 9, avail, 1))
	if sp.State() != PartitionActive || len(logged) != 1 || !strings.Contains(logged[0], "COORDINATOR_NOT_AVAILABLE") {
		t.Fatalf("state %s, logged %q", sp.State(), logged)
	}
	wantAcquired(t, "redelivered", acquire(t, sp, "c", 10, 10), AcquiredRecords{0, 9, 2})

	store.fenceLeaderEpoch(key, 9)
	clock.Advance(time.Minute)
	sp.ExpireLocks(ctx, clock.Now())
	if sp.State() != PartitionFenced {
		t.Fatalf("a fencing answer to the lock-timeout write left the share-partition %s", sp.State())
	}
}

// §8: delivery count goes up on acquisition, never down; a record that would become AVAILABLE
// again at the delivery-count limit becomes ARCHIVED instead, whichever way it is given back.
func TestSharePartitionDeliveryCountLimit(t *testing.T) {
	ctx := context.Background()
	giveBack := map[string]func(sp *SharePartition, clock *fakeClock) error{
		"release ack": func(sp *SharePartition, _ *fakeClock) error {
			return sp.Acknowledge(ctx, "m", []AckBatch{ack(0, 2, AckRelease)})
		},
		"release": func(sp *SharePartition, _ *fakeClock) error { return sp.Release(ctx, "m") },
		"lock timeout": func(sp *SharePartition, clock *fakeClock) error {
			clock.Advance(time.Hour)
			sp.ExpireLocks(ctx, clock.Now())
			return nil
		},
	}
	for name, back := range giveBack {
		t.Run(name, func(t *testing.T) {
			store, key, clock := newFakeStore(), splKey(0), newFakeClock()
			opts := splOptions(clock)
			opts.MaxDeliveryCount = 3
			sp := activeSP(t, store, key, 1, opts)
			for delivery := int16(1); delivery <= 3; delivery++ {
				wantAcquired(t, "delivery", acquire(t, sp, "m", 3, 3), AcquiredRecords{0, 2, delivery})
				if err := back(sp, clock); err != nil {
					t.Fatal(err)
				}
				w := lastWrite(t, store, key)
				state := avail
				if delivery == 3 {
					state = archd
				}
				if !slices.Equal(w.StateBatches, []sharestate.StateBatch{sb(0, 2, state, delivery)}) {
					t.Fatalf("delivery %d: wrote %v", delivery, w.StateBatches)
				}
			}
			if sp.StartOffset() != 3 || store.state(t, key).StartOffset != 3 {
				t.Fatalf("archived records are done: start %d", sp.StartOffset())
			}
			wantAcquired(t, "never again", acquire(t, sp, "m", 3, 3))
		})
	}
}

// §8: a stored delivery count is where counting goes on; counts never go down, whatever happens.
func TestSharePartitionDeliveryCountNeverDown(t *testing.T) {
	store, key, clock := newFakeStore(), splKey(0), newFakeClock()
	store.plant(key, sharestate.State{StateEpoch: 1, StartOffset: 0, Batches: []sharestate.StateBatch{sb(0, 9, avail, 3)}})
	opts := splOptions(clock)
	opts.MaxDeliveryCount = 10
	sp := newSP(t, store, key, 1, opts)
	if err := sp.Initialize(context.Background(), 0, 10); err != nil {
		t.Fatal(err)
	}
	memory, stored := make([]int16, 10), make([]int16, 10)
	for i := range memory {
		memory[i], stored[i] = 3, 3
	}
	// observe checks that no count went down, in memory or in the store, and remembers the counts.
	observe := func(step string, counts []int16, batches []sharestate.StateBatch) {
		t.Helper()
		for _, b := range batches {
			for off := b.FirstOffset; off <= b.LastOffset; off++ {
				if b.DeliveryCount < counts[off] {
					t.Fatalf("%s: offset %d count went down from %d to %d", step, off, counts[off], b.DeliveryCount)
				}
				counts[off] = b.DeliveryCount
			}
		}
	}
	check := func(step string) {
		t.Helper()
		observe(step+" (memory)", memory, sp.Records())
		observe(step+" (store)", stored, store.state(t, key).Batches)
	}
	for round := range 3 {
		acquire(t, sp, "m", 10, 4)
		check(fmt.Sprintf("round %d acquired", round))
		store.force("write", key, sharestate.ErrUnknownServerError)
		_ = sp.Release(context.Background(), "m")
		check("failed release")
		acquire(t, sp, "n", 10, 10)
		check("acquired the rest")
		if err := sp.Release(context.Background(), "m"); err != nil {
			t.Fatal(err)
		}
		check("released")
		acquire(t, sp, "m", 10, 2)
		check("acquired again")
		clock.Advance(time.Hour)
		sp.ExpireLocks(context.Background(), clock.Now())
		check("expired")
	}
	if memory[0] != 3+6 || memory[2] != 3+3 || memory[9] != 3+3 || stored[0] != 9 || stored[9] != 6 {
		t.Fatalf("counts %v in memory, %v stored", memory, stored)
	}
}

// A stored start offset of -1 is replaced by share.auto.offset.reset's.
func TestSharePartitionAutoOffsetReset(t *testing.T) {
	tests := []struct {
		name             string
		reset            AutoOffsetReset
		logStart, logEnd int64
		want             int64
	}{
		{"earliest, log start known", OffsetResetEarliest, 40, 100, 40},
		{"earliest, log start unknown", OffsetResetEarliest, -1, 100, 0},
		{"latest", OffsetResetLatest, 40, 100, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, key := newFakeStore(), splKey(0)
			store.setup(t, key, 1, -1)
			opts := splOptions(newFakeClock())
			opts.AutoOffsetReset = tt.reset
			sp := newSP(t, store, key, 1, opts)
			if err := sp.Initialize(context.Background(), tt.logStart, tt.logEnd); err != nil {
				t.Fatal(err)
			}
			if sp.StartOffset() != tt.want {
				t.Fatalf("start %d, want %d", sp.StartOffset(), tt.want)
			}
			wantAcquired(t, "from the reset offset", acquire(t, sp, "m", tt.want+2, 10), AcquiredRecords{tt.want, tt.want + 1, 1})
			if err := sp.Acknowledge(context.Background(), "m", []AckBatch{ack(tt.want, tt.want, AckAccept)}); err != nil {
				t.Fatal(err)
			}
			if st := store.state(t, key); st.StartOffset != tt.want+1 {
				t.Fatalf("stored start %d, want %d", st.StartOffset, tt.want+1)
			}
		})
	}
}

// The broker limits' ranges (semantics §8) are enforced.
func TestSharePartitionOptionsRange(t *testing.T) {
	bad := []SharePartitionOptions{
		{MaxDeliveryCount: 1}, {MaxDeliveryCount: 11}, {MaxRecordLocks: 99}, {MaxRecordLocks: 10001}, {AutoOffsetReset: 2},
	}
	for _, o := range bad {
		if _, err := NewSharePartition(splKey(0), 1, newFakeStore(), o); err == nil {
			t.Fatalf("options %+v accepted", o)
		}
	}
	if _, err := NewSharePartition(splKey(0), -1, newFakeStore(), SharePartitionOptions{}); err == nil {
		t.Fatal("negative leader epoch accepted")
	}
	sp, err := NewSharePartition(splKey(0), 1, newFakeStore(), SharePartitionOptions{MaxDeliveryCount: 2})
	if err != nil || sp.opts.MaxRecordLocks != 2000 || sp.opts.RecordLockDuration != 30*time.Second || sp.opts.MaxDeliveryCount != 2 {
		t.Fatalf("defaults: %+v, %v", sp.opts, err)
	}
}

// Many members fetching and acknowledging at once: no record is held by two members at a time, the
// Writes of the share-partition never overlap, and every record ends acknowledged exactly once.
func TestSharePartitionConcurrentUse(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	sp := activeSP(t, store, key, 1, splOptions(newFakeClock()))
	const total, members = 600, 6
	var mu sync.Mutex
	acknowledged := map[int64]string{}
	var wg sync.WaitGroup
	for i := range members {
		member := fmt.Sprintf("m%d", i)
		wg.Go(func() {
			// Until every record is acknowledged, not a fixed number of rounds: on a busy machine one
			// member can release a record after the others have run out of rounds (bounded, so a bug
			// that strands a record fails the test instead of hanging it).
			for range 5000 {
				mu.Lock()
				done := len(acknowledged) == total
				mu.Unlock()
				if done {
					return
				}
				recs, err := sp.Acquire(member, total, 7)
				if err != nil {
					t.Error(err)
					return
				}
				var batches []AckBatch
				for _, r := range recs {
					typ := AckAccept
					if r.FirstOffset%5 == 0 && r.DeliveryCount == 1 {
						typ = AckRelease
					}
					batches = append(batches, ack(r.FirstOffset, r.LastOffset, typ))
					for off := r.FirstOffset; off <= r.LastOffset && typ == AckAccept; off++ {
						mu.Lock()
						if prev, ok := acknowledged[off]; ok {
							t.Errorf("offset %d delivered to %s after %s acknowledged it", off, member, prev)
						}
						acknowledged[off] = member
						mu.Unlock()
					}
				}
				if err := sp.Acknowledge(context.Background(), member, batches); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if store.maxWritesInFlight != 1 {
		t.Fatalf("%d writes of one share-partition were in flight at once", store.maxWritesInFlight)
	}
	if st := store.state(t, key); st.StartOffset != total || len(acknowledged) != total {
		t.Fatalf("stored start %d, %d acknowledged; want %d", st.StartOffset, len(acknowledged), total)
	}
}

// Writes of one share-partition are made one at a time, in the order of their transitions: a
// second acknowledgement waits for the first one's Write, while acquisitions go on.
func TestSharePartitionWritesAreOrdered(t *testing.T) {
	store, key := newFakeStore(), splKey(0)
	sp := activeSP(t, store, key, 1, splOptions(newFakeClock()))
	acquire(t, sp, "a", 10, 10)
	var mu sync.Mutex
	inWrite := 0
	entered, release := make(chan struct{}, 2), make(chan struct{})
	store.hook("write", key, func() {
		mu.Lock()
		inWrite++
		mu.Unlock()
		entered <- struct{}{}
		<-release
	})
	first, second := make(chan error), make(chan error)
	go func() { first <- sp.Acknowledge(context.Background(), "a", []AckBatch{ack(0, 4, AckAccept)}) }()
	<-entered
	go func() { second <- sp.Acknowledge(context.Background(), "a", []AckBatch{ack(5, 9, AckReject)}) }()
	wantAcquired(t, "acquisition during the Write", acquire(t, sp, "b", 12, 10), AcquiredRecords{10, 11, 1})
	time.Sleep(50 * time.Millisecond) // room for a second Write to start, were it not held back
	mu.Lock()
	if inWrite != 1 {
		t.Fatalf("%d Writes in flight at once", inWrite)
	}
	mu.Unlock()
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil {
		t.Fatal(err)
	}
	writes := store.callsOf("write", key)
	if len(writes) != 2 || writes[0].write.StartOffset != 5 || writes[1].write.StartOffset != 10 ||
		!slices.Equal(writes[1].write.StateBatches, []sharestate.StateBatch{sb(5, 9, archd, 1)}) {
		t.Fatalf("writes %+v", writes)
	}
}
