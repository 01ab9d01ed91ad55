package sharestate

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// This file is the sequential model of semantics §4–§7: what each operation answers and does to one
// share-partition's state, as pure functions. The Kubernetes-backed persister applies exactly these
// functions to the state it read, and writes the result conditionally on the resourceVersion it read,
// so that every answer is as if the operations ran one at a time.

// State is one share-partition's persisted state (semantics §5).
type State struct {
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32
	Batches               []StateBatch
}

// Outcome is a partition's answer: NONE, or an error code with a message.
type Outcome struct {
	Code    ErrorCode
	Message string
}

// OK reports whether the outcome is NONE.
func (o Outcome) OK() bool { return o.Code == ErrNone }

// Fail returns the outcome of code with a formatted message.
func Fail(code ErrorCode, format string, args ...any) Outcome {
	return Outcome{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Limits bound what one write may carry and what a state may hold.
type Limits struct {
	// MaxBatchesPerWrite bounds the batches of one Write request (semantics §4; default: the in-flight
	// window, 2000).
	MaxBatchesPerWrite int
	// MaxStoredBatches bounds a stored state's batches (the CRD's limit).
	MaxStoredBatches int
}

// DefaultLimits are Kafka's default in-flight window and the CRD's bound.
var DefaultLimits = Limits{MaxBatchesPerWrite: 2000, MaxStoredBatches: 10000}

// CheckGroupID refuses a group id that cannot name a share group (semantics §4's input checks of our own):
// empty, longer than 255 bytes, or not UTF-8.
func CheckGroupID(group string) Outcome {
	if group == "" {
		return Fail(ErrInvalidRequest, "group id is missing")
	}
	if len(group) > 255 {
		return Fail(ErrInvalidRequest, "group id is longer than 255 bytes")
	}
	if !utf8.ValidString(group) {
		// Kafka's strings are UTF-8; Kubernetes would store another id than the one asked for.
		return Fail(ErrInvalidRequest, "group id is not valid UTF-8")
	}
	return Outcome{}
}

// MaxPartitions bounds the partitions whose state can be kept: a ShareGroup declares at most this
// many partitions a topic, and a SharePartitionState's partition is below it
// (api/v1alpha1.MaxPartitions, the same number, which the schema enforces).
const MaxPartitions = 1000000

// checkKey is checks 1 and 2 of semantics §4, common to all five operations.
func checkKey(topic TopicID, partition int32) Outcome {
	if topic.IsZero() {
		return Fail(ErrInvalidRequest, "topic id is missing")
	}
	if partition < 0 {
		return Fail(ErrInvalidRequest, "partition %d is negative", partition)
	}
	if partition >= MaxPartitions {
		// No ShareGroup can declare it, so it is a partition this store does not know (semantics §6);
		// storing it would be refused by the schema, which the broker would see as a server error.
		return Fail(ErrUnknownTopicOrPartition, "partition %d is beyond the %d partitions a topic can have here", partition, MaxPartitions)
	}
	return Outcome{}
}

// CheckWriteInput is Write's validation that needs no stored state: checks 1–4 of semantics §4 and this
// project's own input checks. It runs before a write is queued.
func CheckWriteInput(topic TopicID, p WritePartition, limits Limits) Outcome {
	if o := checkKey(topic, p.Partition); !o.OK() {
		return o
	}
	switch {
	case p.LeaderEpoch < 0:
		return Fail(ErrInvalidRequest, "leader epoch %d is negative", p.LeaderEpoch)
	case p.StateEpoch < 0:
		return Fail(ErrInvalidRequest, "state epoch %d is negative", p.StateEpoch)
	case p.StartOffset < -1:
		return Fail(ErrInvalidRequest, "start offset %d is below -1", p.StartOffset)
	case p.DeliveryCompleteCount < -1:
		return Fail(ErrInvalidRequest, "delivery complete count %d is below -1", p.DeliveryCompleteCount)
	case len(p.StateBatches) > limits.MaxBatchesPerWrite:
		return Fail(ErrInvalidRequest, "%d state batches exceed the maximum of %d per write", len(p.StateBatches), limits.MaxBatchesPerWrite)
	}
	for i, b := range p.StateBatches {
		if err := b.Validate(); err != nil {
			return Fail(ErrInvalidRequest, "state batch %d: %v", i, err)
		}
	}
	return Outcome{}
}

// ApplyWrite is Write on a stored state (nil: not initialized), after CheckWriteInput passed: checks
// 5–8 of semantics §4, then semantics §5's effect. known says whether the topic partition is known (semantics §6).
func ApplyWrite(stored *State, p WritePartition, known bool, limits Limits) (State, Outcome) {
	if stored == nil {
		return State{}, Fail(ErrInvalidRequest, "write of uninitialized share partition %d", p.Partition)
	}
	if stored.LeaderEpoch > p.LeaderEpoch {
		return *stored, Fail(ErrFencedLeaderEpoch, "leader epoch %d is older than the stored %d", p.LeaderEpoch, stored.LeaderEpoch)
	}
	if stored.StateEpoch > p.StateEpoch {
		return *stored, Fail(ErrFencedStateEpoch, "state epoch %d is older than the stored %d", p.StateEpoch, stored.StateEpoch)
	}
	if !known {
		return *stored, Fail(ErrUnknownTopicOrPartition, "partition %d is not declared by the share group", p.Partition)
	}
	next := *stored
	if p.StartOffset != -1 && p.StartOffset > next.StartOffset {
		next.StartOffset = p.StartOffset
	}
	next.DeliveryCompleteCount = deliveryCompleteCount(stored, p)
	next.Batches = CombineBatches(stored.Batches, p.StateBatches, next.StartOffset)
	if len(next.Batches) > limits.MaxStoredBatches {
		return *stored, Fail(ErrInvalidRequest, "the state would hold %d batches, above the maximum of %d", len(next.Batches), limits.MaxStoredBatches)
	}
	return next, Outcome{}
}

// deliveryCompleteCount is the count a Write leaves (semantics §5), decided as Kafka 4.4.0's share
// coordinator decides it (ShareCoordinatorShard.generateShareStateRecord in
// kafka-share-coordinator-4.4.0.jar, release commit 1156b2752aaa28ea, read with javap). A count
// counts from a start offset up: one sent with a start offset below the stored one is stale and
// ignored; at the stored start offset the count only rises, so neither a late Write nor a v0 Write
// (which carries -1) lowers it; a Write that moves the start offset up brings the count of the new
// start, -1 (not known) included.
func deliveryCompleteCount(stored *State, p WritePartition) int32 {
	switch {
	case p.StartOffset == stored.StartOffset:
		return max(stored.DeliveryCompleteCount, p.DeliveryCompleteCount)
	case p.StartOffset < stored.StartOffset: // -1 included: it keeps the stored start offset
		return stored.DeliveryCompleteCount
	default:
		return p.DeliveryCompleteCount
	}
}

// CheckReadInput is Read's validation that needs no stored state (checks 1–3 of semantics §4).
func CheckReadInput(topic TopicID, p ReadPartition) Outcome {
	if o := checkKey(topic, p.Partition); !o.OK() {
		return o
	}
	if p.LeaderEpoch < 0 {
		return Fail(ErrInvalidRequest, "leader epoch %d is negative", p.LeaderEpoch)
	}
	return Outcome{}
}

// ApplyRead is Read on a stored state (nil: not initialized), after CheckReadInput passed. A higher
// leader epoch is stored (and fences older leaders); raised says the state must be written.
func ApplyRead(stored *State, p ReadPartition, known bool) (next State, raised bool, o Outcome) {
	if stored == nil {
		return State{}, false, Fail(ErrInvalidRequest, "read of uninitialized share partition %d", p.Partition)
	}
	if stored.LeaderEpoch > p.LeaderEpoch {
		return *stored, false, Fail(ErrFencedLeaderEpoch, "leader epoch %d is older than the stored %d", p.LeaderEpoch, stored.LeaderEpoch)
	}
	if !known {
		return *stored, false, Fail(ErrUnknownTopicOrPartition, "partition %d is not declared by the share group", p.Partition)
	}
	next = *stored
	if p.LeaderEpoch > stored.LeaderEpoch {
		next.LeaderEpoch = p.LeaderEpoch
		raised = true
	}
	return next, raised, Outcome{}
}

// CheckInitializeInput is Initialize's validation that needs no stored state.
func CheckInitializeInput(topic TopicID, p InitializePartition) Outcome {
	if o := checkKey(topic, p.Partition); !o.OK() {
		return o
	}
	if p.StateEpoch < 0 {
		return Fail(ErrInvalidRequest, "state epoch %d is negative", p.StateEpoch)
	}
	if p.StateEpoch >= MaxStateEpoch {
		return Fail(ErrInvalidRequest, "state epoch %d leaves no room for a fence: the highest an Initialize may use is %d", p.StateEpoch, MaxStateEpoch-1)
	}
	if p.StartOffset < -1 {
		return Fail(ErrInvalidRequest, "start offset %d is below -1", p.StartOffset)
	}
	return Outcome{}
}

// MaxStateEpoch is the highest state epoch a share-partition can reach (an int32 on the wire). The
// operator's fence raises the state epoch by one, so Initialize refuses MaxStateEpoch itself: a state
// initialized at MaxStateEpoch-1 can still be fenced once, and one at MaxStateEpoch could never be
// (our choice: Kafka's coordinator accepts any state epoch; semantics §5, §9).
const MaxStateEpoch int32 = math.MaxInt32

// ApplyInitialize is Initialize on a stored state (nil: none). On success a fresh state replaces the
// stored one, at an equal state epoch as at a higher one, as Kafka's share coordinator writes one
// whenever the stored state epoch is not above the request's (semantics §5). The fresh state keeps the
// stored leader epoch: a leader fenced before the reset stays fenced after it, as Kafka's coordinator
// keeps the highest leader epoch it has seen until the state is deleted.
func ApplyInitialize(stored *State, p InitializePartition, known bool) (next State, o Outcome) {
	if stored != nil && stored.StateEpoch > p.StateEpoch {
		return *stored, Fail(ErrFencedStateEpoch, "state epoch %d is older than the stored %d", p.StateEpoch, stored.StateEpoch)
	}
	if !known {
		if stored != nil {
			return *stored, Fail(ErrUnknownTopicOrPartition, "partition %d is not declared by the share group", p.Partition)
		}
		return State{}, Fail(ErrUnknownTopicOrPartition, "partition %d is not declared by the share group", p.Partition)
	}
	next = FreshState(p.StateEpoch, p.StartOffset)
	if stored != nil {
		next.LeaderEpoch = stored.LeaderEpoch
	}
	return next, Outcome{}
}

// FreshState is the state Initialize creates where there was none (semantics §5): leader epoch 0. A reset
// of an existing state keeps its leader epoch (ApplyInitialize).
func FreshState(stateEpoch int32, startOffset int64) State {
	complete := int32(0)
	if startOffset == -1 {
		complete = -1
	}
	return State{StateEpoch: stateEpoch, StartOffset: startOffset, DeliveryCompleteCount: complete}
}

// CheckKeyInput is the validation of Delete and ReadSummary (checks 1 and 2 of semantics §4).
func CheckKeyInput(topic TopicID, partition int32) Outcome { return checkKey(topic, partition) }

// SummaryOf is ReadSummary's answer for a stored state (nil: none, which is not an error).
func SummaryOf(stored *State) ReadSummaryResult {
	if stored == nil {
		return ReadSummaryResult{StartOffset: -1, DeliveryCompleteCount: -1}
	}
	return ReadSummaryResult{
		StateEpoch: stored.StateEpoch, LeaderEpoch: stored.LeaderEpoch,
		StartOffset: stored.StartOffset, DeliveryCompleteCount: stored.DeliveryCompleteCount,
	}
}

// InFlightRecords counts the offsets the batches cover whose delivery is not complete, saturating
// at MaxInt64.
func InFlightRecords(batches []StateBatch) int64 {
	var n int64
	for _, b := range batches {
		if b.DeliveryState == DeliveryStateAcknowledged || b.DeliveryState == DeliveryStateArchived {
			continue
		}
		span := b.LastOffset - b.FirstOffset + 1
		if span <= 0 || n > math.MaxInt64-span {
			return math.MaxInt64
		}
		n += span
	}
	return n
}
