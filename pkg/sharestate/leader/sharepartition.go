package leader

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// This file is the share-partition leader's SharePartition (semantics §8, Kafka's SharePartition after
// KAFKA-17002): the in-flight records of one share group on one topic partition, loaded from the
// persister and written back to it. There is no Kafka log here: the caller says where the log ends
// and gets offsets to deliver.

// SharePartitionKey names a share-partition: a share group on a topic partition.
type SharePartitionKey struct {
	GroupID   string
	TopicID   sharestate.TopicID
	Partition int32
}

func (k SharePartitionKey) String() string {
	return fmt.Sprintf("%s/%s-%d", k.GroupID, k.TopicID, k.Partition)
}

// PartitionState is a SharePartition's life cycle (semantics §8): EMPTY → INITIALIZING → ACTIVE, or
// INITIALIZING → FAILED; any state → FENCED.
type PartitionState int8

// The states of a SharePartition.
const (
	// PartitionEmpty: created, its state not read yet.
	PartitionEmpty PartitionState = iota
	// PartitionInitializing: its first Read is in flight.
	PartitionInitializing
	// PartitionActive: loaded; records can be acquired and acknowledged.
	PartitionActive
	// PartitionFailed: its state could not be read or is invalid.
	PartitionFailed
	// PartitionFenced: a leader with a later epoch, or a newer state, exists; this one is dead.
	PartitionFenced
)

func (s PartitionState) String() string {
	switch s {
	case PartitionEmpty:
		return "EMPTY"
	case PartitionInitializing:
		return "INITIALIZING"
	case PartitionActive:
		return "ACTIVE"
	case PartitionFailed:
		return "FAILED"
	case PartitionFenced:
		return "FENCED"
	default:
		return fmt.Sprintf("PartitionState(%d)", int8(s))
	}
}

// AutoOffsetReset is share.auto.offset.reset: where a share-partition with no start offset yet
// begins.
type AutoOffsetReset int8

// The auto offset reset policies.
const (
	// OffsetResetEarliest starts at the log start offset (0 when unknown).
	OffsetResetEarliest AutoOffsetReset = iota
	// OffsetResetLatest starts at the log end offset.
	OffsetResetLatest
)

// AcquiredRecords is a run of records handed to a member, all with one delivery count.
type AcquiredRecords struct {
	FirstOffset   int64
	LastOffset    int64
	DeliveryCount int16
}

// SharePartitionOptions configure SharePartitions. Zero values take the defaults.
type SharePartitionOptions struct {
	// MaxRecordLocks is group.share.partition.max.record.locks: offsets at or above the start offset
	// plus this many are not handed out (default 2000, range 100–10000).
	MaxRecordLocks int
	// MaxDeliveryCount is group.share.delivery.count.limit: a record delivered this often is archived
	// instead of made available again (default 5, range 2–10).
	MaxDeliveryCount int
	// RecordLockDuration is group.share.record.lock.duration.ms: how long an acquired record stays with
	// its member before ExpireLocks makes it available again (default 30s).
	RecordLockDuration time.Duration
	// AutoOffsetReset is where a share-partition whose stored start offset is -1 begins.
	AutoOffsetReset AutoOffsetReset
	// Retry spaces the retries of retriable persister answers (default DefaultRetryPolicy).
	Retry RetryPolicy
	// Now is the clock of acquisition locks (default time.Now).
	Now func() time.Time
	// Logger receives what the leader swallows: failed lock-timeout writes, fencing (default: discard).
	Logger logr.Logger
}

func (o *SharePartitionOptions) setDefaults() error {
	setDefault(&o.MaxRecordLocks, 2000)
	setDefault(&o.MaxDeliveryCount, 5)
	setDefault(&o.RecordLockDuration, 30*time.Second)
	switch {
	case o.MaxRecordLocks < 100 || o.MaxRecordLocks > 10000:
		return fmt.Errorf("sharestate: max record locks %d is outside 100–10000", o.MaxRecordLocks)
	case o.MaxDeliveryCount < 2 || o.MaxDeliveryCount > 10:
		return fmt.Errorf("sharestate: max delivery count %d is outside 2–10", o.MaxDeliveryCount)
	case o.AutoOffsetReset != OffsetResetEarliest && o.AutoOffsetReset != OffsetResetLatest:
		return fmt.Errorf("sharestate: unknown auto offset reset %d", o.AutoOffsetReset)
	}
	if o.Retry == nil {
		o.Retry = DefaultRetryPolicy
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return nil
}

// SharePartition is the leader's state of one share-partition. Its leader epoch is fixed when it is
// created and sent in every Read and Write; the state epoch it Read is sent in every Write. It is
// safe for concurrent use: acquisitions take a short lock and never wait for the persister; Writes
// (acknowledge, release, lock timeout) are made one at a time, in the order their transitions were
// taken, and the state lock is not held while they are in flight.
type SharePartition struct {
	key         SharePartitionKey
	leaderEpoch int32
	store       sharestate.Store
	opts        SharePartitionOptions
	log         logr.Logger

	// writeMu orders the Writes: it is held from taking a transition to committing or rolling it
	// back, so at most one transition is pending at a time. Taken before mu, never while holding it.
	writeMu sync.Mutex

	mu          sync.Mutex // guards the fields below
	state       PartitionState
	stateEpoch  int32
	records     inflight
	loaded      bool            // records hold the Read state
	failure     *PartitionError // why the share-partition is FAILED or FENCED
	initDone    chan struct{}   // closed when INITIALIZING ends
	fetchLocked bool
}

// NewSharePartition returns an EMPTY SharePartition for key, leading at leaderEpoch.
func NewSharePartition(key SharePartitionKey, leaderEpoch int32, store sharestate.Store, opts SharePartitionOptions) (*SharePartition, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, errors.New("sharestate: a SharePartition needs a Store")
	}
	if leaderEpoch < 0 {
		return nil, fmt.Errorf("sharestate: leader epoch %d is negative", leaderEpoch)
	}
	return &SharePartition{
		key: key, leaderEpoch: leaderEpoch, store: store, opts: opts,
		log: opts.Logger.WithValues("group", key.GroupID, "topicId", key.TopicID.String(), "partition", key.Partition),
	}, nil
}

// Key returns the share-partition's key.
func (sp *SharePartition) Key() SharePartitionKey { return sp.key }

// LeaderEpoch returns the leader epoch the share-partition was created with.
func (sp *SharePartition) LeaderEpoch() int32 { return sp.leaderEpoch }

// State returns the share-partition's life-cycle state.
func (sp *SharePartition) State() PartitionState {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.state
}

// StateEpoch returns the state epoch the share-partition Read (0 before it did).
func (sp *SharePartition) StateEpoch() int32 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.stateEpoch
}

// StartOffset returns the first offset still tracked (-1 when the state was never loaded).
func (sp *SharePartition) StartOffset() int64 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.loaded {
		return -1
	}
	return sp.records.start
}

// Records returns the tracked records from the start offset on, as state batches with ACQUIRED
// (1) for records held by members (whichever member). It is for inspection and tests.
func (sp *SharePartition) Records() []sharestate.StateBatch {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	var out []sharestate.StateBatch
	for _, s := range sp.records.spans {
		out = appendBatch(out, s.batch())
	}
	return out
}

// Initialize loads the share-partition's state on first use (EMPTY → INITIALIZING → ACTIVE): a Read
// with its leader epoch. A stored start offset of -1 is replaced by share.auto.offset.reset's:
// logStart (0 when negative) for earliest, logEnd for latest. A failed Read makes it FAILED, or
// FENCED when the persister fenced it. Callers arriving while the Read is in flight wait for it; once
// the share-partition is ACTIVE, Initialize returns nil at once.
func (sp *SharePartition) Initialize(ctx context.Context, logStart, logEnd int64) error {
	sp.mu.Lock()
	switch sp.state {
	case PartitionActive:
		sp.mu.Unlock()
		return nil
	case PartitionFailed, PartitionFenced:
		defer sp.mu.Unlock()
		return sp.failure
	case PartitionInitializing:
		done := sp.initDone
		sp.mu.Unlock()
		return sp.awaitInitialized(ctx, done)
	}
	sp.state, sp.initDone = PartitionInitializing, make(chan struct{})
	sp.mu.Unlock()

	res, perr := sp.readState(ctx)
	var f inflight
	if perr == nil {
		f, perr = sp.loadable(res, logStart, logEnd)
	}
	return sp.initialized(res.StateEpoch, f, perr)
}

// initialized ends INITIALIZING: ACTIVE with the loaded records, or FAILED or FENCED by perr. It
// wakes the callers waiting for it.
func (sp *SharePartition) initialized(stateEpoch int32, f inflight, perr *PartitionError) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	defer close(sp.initDone)
	switch {
	case sp.state == PartitionFenced: // fenced from outside while the Read was in flight
		return sp.failure
	case perr == nil:
		sp.state, sp.stateEpoch, sp.records, sp.loaded = PartitionActive, stateEpoch, f, true
		return nil
	case perr.Fenced:
		sp.fenceLocked(perr)
	default:
		sp.state, sp.failure = PartitionFailed, perr
	}
	return perr
}

// awaitInitialized waits for another caller's Initialize to end and returns its outcome.
func (sp *SharePartition) awaitInitialized(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
	case <-ctx.Done():
		return partitionErr(sharestate.ErrLeaderNotAvailable, "share-partition %s is still loading its state: %v", sp.key, ctx.Err())
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.state == PartitionActive {
		return nil
	}
	return sp.failure
}

// loadable checks a Read's answer (semantics §8: a batch below the start offset, or ending before it
// begins, is invalid) and builds the record state from it.
func (sp *SharePartition) loadable(res sharestate.ReadResult, logStart, logEnd int64) (inflight, *PartitionError) {
	if err := checkStoredBatches(res.StartOffset, res.StateBatches); err != nil {
		return inflight{}, partitionErr(sharestate.ErrUnknownServerError, "share-partition %s has invalid stored state: %v", sp.key, err)
	}
	start, batches := res.StartOffset, res.StateBatches
	if start == -1 {
		start = sp.resetOffset(logStart, logEnd)
		batches = sharestate.CombineBatches(nil, batches, start)
	}
	return loadInflight(start, batches), nil
}

// checkStoredBatches validates stored batches: each within itself valid and at or above start
// (unless start is -1), sorted and non-overlapping.
func checkStoredBatches(start int64, batches []sharestate.StateBatch) error {
	if start < -1 {
		return fmt.Errorf("start offset %d is below -1", start)
	}
	for i, b := range batches {
		if err := b.Validate(); err != nil {
			return err
		}
		if start != -1 && b.FirstOffset < start {
			return fmt.Errorf("batch %v begins below the start offset %d", b, start)
		}
		if i > 0 && b.FirstOffset <= batches[i-1].LastOffset {
			return fmt.Errorf("batch %v overlaps or precedes batch %v", b, batches[i-1])
		}
	}
	return nil
}

// resetOffset is share.auto.offset.reset's start offset.
func (sp *SharePartition) resetOffset(logStart, logEnd int64) int64 {
	if sp.opts.AutoOffsetReset == OffsetResetLatest {
		return max(logEnd, 0)
	}
	return max(logStart, 0)
}

// notActiveLocked is the error for an operation refused because the share-partition is not ACTIVE.
func (sp *SharePartition) notActiveLocked() *PartitionError {
	switch sp.state {
	case PartitionFailed, PartitionFenced:
		return sp.failure
	default:
		return partitionErr(sharestate.ErrLeaderNotAvailable, "share-partition %s is %s", sp.key, sp.state)
	}
}

// fenceLocked marks the share-partition FENCED: it hands out and accepts nothing any more.
func (sp *SharePartition) fenceLocked(cause *PartitionError) {
	if sp.state == PartitionFenced {
		return
	}
	sp.state, sp.failure = PartitionFenced, cause
	sp.log.Info("Share-partition was fenced", "leaderEpoch", sp.leaderEpoch, "stateEpoch", sp.stateEpoch, "reason", cause.Error())
}

// MarkFenced fences the share-partition from outside: its broker lost the partition's leadership.
func (sp *SharePartition) MarkFenced() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.fenceLocked(partitionErr(sharestate.ErrNotLeaderOrFollower, "share-partition %s is no longer led here", sp.key))
}

// TryFetchLock takes the fetch lock, which lets one fetch at a time read the log for the
// share-partition. It is refused (false) while another fetch holds it and, with an error, unless the
// share-partition is ACTIVE.
func (sp *SharePartition) TryFetchLock() (bool, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.state != PartitionActive {
		return false, sp.notActiveLocked()
	}
	if sp.fetchLocked {
		return false, nil
	}
	sp.fetchLocked = true
	return true, nil
}

// ReleaseFetchLock gives the fetch lock back.
func (sp *SharePartition) ReleaseFetchLock() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.fetchLocked = false
}

// Acquire hands member up to maxRecords AVAILABLE records below logEndOffset, from the start offset
// on and within the in-flight window (MaxRecordLocks offsets from the start offset). Each record's
// delivery count goes up by one and it stays the member's until it is acknowledged, released, or its
// lock expires after RecordLockDuration. It is refused unless the share-partition is ACTIVE.
func (sp *SharePartition) Acquire(member string, logEndOffset int64, maxRecords int) ([]AcquiredRecords, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.state != PartitionActive {
		return nil, sp.notActiveLocked()
	}
	if member == "" {
		return nil, partitionErr(sharestate.ErrInvalidRequest, "member id is missing")
	}
	if maxRecords <= 0 {
		return nil, nil
	}
	limit := min(logEndOffset, saturatingAdd(sp.records.start, int64(sp.opts.MaxRecordLocks)))
	deadline := sp.opts.Now().Add(sp.opts.RecordLockDuration)
	return sp.records.acquire(member, limit, maxRecords, deadline), nil
}

// saturatingAdd is a+b for b ≥ 0, capped at MaxInt64.
func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// setDefault sets *v to def when it is not above zero.
func setDefault[T int | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
