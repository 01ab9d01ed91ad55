package leader

import (
	"context"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// This file is how acquired records end: acknowledged by their member, released by it, or taken
// back when their acquisition lock expires; and how each such change is written to the persister.

// AckType is how a member acknowledges records: Kafka's AcknowledgeType, with its wire values.
type AckType int8

// The acknowledge types (semantics §8).
const (
	// AckGap: the offsets are not records (a gap in the log): ARCHIVED.
	AckGap AckType = 0
	// AckAccept: processed: ACKNOWLEDGED.
	AckAccept AckType = 1
	// AckRelease: to be delivered again: AVAILABLE, or ARCHIVED at the delivery-count limit.
	AckRelease AckType = 2
	// AckReject: unprocessable: ARCHIVED.
	AckReject AckType = 3
)

// AckBatch acknowledges the records [FirstOffset, LastOffset] with one type.
type AckBatch struct {
	FirstOffset int64
	LastOffset  int64
	Type        AckType
}

// Acknowledge ends the member's acquisition of the batches' records: ACCEPT → ACKNOWLEDGED, RELEASE
// → AVAILABLE (ARCHIVED at the delivery-count limit), REJECT and gaps → ARCHIVED. Every record must
// be ACQUIRED by the member, or nothing changes (INVALID_RECORD_STATE). The change is written to the
// persister with the share-partition's epochs and its advanced start offset; if the Write fails, the
// records return to ACQUIRED, and a fencing answer fences the share-partition.
func (sp *SharePartition) Acknowledge(ctx context.Context, member string, batches []AckBatch) error {
	sp.writeMu.Lock()
	defer sp.writeMu.Unlock()
	tx, wp, err := sp.takeAcknowledge(member, batches)
	if err != nil || tx == nil {
		return err
	}
	return sp.persist(ctx, tx, wp)
}

// takeAcknowledge checks an acknowledgement and applies it in memory, pending its Write; a nil
// transition means there is nothing to write.
func (sp *SharePartition) takeAcknowledge(member string, batches []AckBatch) (*transition, sharestate.WritePartition, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.state != PartitionActive {
		return nil, sharestate.WritePartition{}, sp.notActiveLocked()
	}
	if err := checkAckBatches(batches); err != nil {
		return nil, sharestate.WritePartition{}, err
	}
	for _, b := range batches {
		if !sp.records.heldBy(b.FirstOffset, b.LastOffset, member) {
			return nil, sharestate.WritePartition{}, partitionErr(sharestate.ErrInvalidRecordState,
				"records %d-%d of share-partition %s are not acquired by member %q", b.FirstOffset, b.LastOffset, sp.key, member)
		}
	}
	if len(batches) == 0 {
		return nil, sharestate.WritePartition{}, nil
	}
	tx := &transition{}
	for _, b := range batches {
		sp.records.change(b.FirstOffset, b.LastOffset, tx, true, sp.acknowledged(b.Type))
	}
	return tx, sp.writeOfLocked(tx), nil
}

// checkAckBatches refuses malformed acknowledgements: a negative or reversed range, an unknown type,
// batches out of order or overlapping.
func checkAckBatches(batches []AckBatch) *PartitionError {
	for i, b := range batches {
		switch {
		case b.FirstOffset < 0 || b.LastOffset < b.FirstOffset:
			return partitionErr(sharestate.ErrInvalidRequest, "acknowledge batch %d-%d is not a range of offsets", b.FirstOffset, b.LastOffset)
		case b.Type < AckGap || b.Type > AckReject:
			return partitionErr(sharestate.ErrInvalidRequest, "acknowledge type %d is unknown", b.Type)
		case i > 0 && b.FirstOffset <= batches[i-1].LastOffset:
			return partitionErr(sharestate.ErrInvalidRequest, "acknowledge batch %d-%d overlaps or precedes the one before", b.FirstOffset, b.LastOffset)
		}
	}
	return nil
}

// acknowledged returns what an acknowledge type makes of an acquired record.
func (sp *SharePartition) acknowledged(t AckType) func(span) span {
	switch t {
	case AckAccept:
		return ended(sharestate.DeliveryStateAcknowledged)
	case AckRelease:
		return sp.released
	default:
		return ended(sharestate.DeliveryStateArchived)
	}
}

// ended returns a record's end in state: no member holds it any more.
func ended(state sharestate.DeliveryState) func(span) span {
	return func(s span) span {
		s.state, s.member, s.deadline = state, "", time.Time{}
		return s
	}
}

// released is a record given back for another delivery: AVAILABLE, or ARCHIVED when it was
// delivered MaxDeliveryCount times already. Its delivery count stays.
func (sp *SharePartition) released(s span) span {
	if int(s.count) >= sp.opts.MaxDeliveryCount {
		return ended(sharestate.DeliveryStateArchived)(s)
	}
	return ended(sharestate.DeliveryStateAvailable)(s)
}

// Release gives back every record the member holds (its share session closed): AVAILABLE, or
// ARCHIVED at the delivery-count limit. Like Acknowledge, a failed Write puts them back.
func (sp *SharePartition) Release(ctx context.Context, member string) error {
	sp.writeMu.Lock()
	defer sp.writeMu.Unlock()
	tx, wp, err := sp.takeRelease(member)
	if err != nil || tx == nil {
		return err
	}
	return sp.persist(ctx, tx, wp)
}

// takeRelease applies a release in memory, pending its Write.
func (sp *SharePartition) takeRelease(member string) (*transition, sharestate.WritePartition, error) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.state != PartitionActive {
		return nil, sharestate.WritePartition{}, sp.notActiveLocked()
	}
	held := sp.records.acquiredBy(member)
	if len(held) == 0 {
		return nil, sharestate.WritePartition{}, nil
	}
	tx := &transition{}
	for _, r := range held {
		sp.records.change(r[0], r[1], tx, true, sp.released)
	}
	return tx, sp.writeOfLocked(tx), nil
}

// ExpireLocks takes back the records whose acquisition lock ended at or before now: AVAILABLE, or
// ARCHIVED at the delivery-count limit. The change stands whatever its Write answers: a failure is
// only logged (a fencing answer also fences the share-partition). It returns how many records it
// took back.
func (sp *SharePartition) ExpireLocks(ctx context.Context, now time.Time) int64 {
	sp.writeMu.Lock()
	defer sp.writeMu.Unlock()
	wp, n := sp.takeExpired(now)
	if n == 0 {
		return 0
	}
	if perr := sp.writeState(ctx, wp); perr != nil {
		sp.log.Error(perr, "Write of expired acquisition locks failed; the records stay released", "records", n)
		if perr.Fenced {
			sp.mu.Lock()
			sp.fenceLocked(perr)
			sp.mu.Unlock()
		}
	}
	return n
}

// takeExpired applies the lock timeouts in memory, for good, and returns the Write that records them.
func (sp *SharePartition) takeExpired(now time.Time) (sharestate.WritePartition, int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.state != PartitionActive {
		return sharestate.WritePartition{}, 0
	}
	var n int64
	tx := &transition{}
	for _, r := range sp.records.expired(now) {
		sp.records.change(r[0], r[1], tx, false, sp.released)
		n += r[1] - r[0] + 1
	}
	if n == 0 {
		return sharestate.WritePartition{}, 0
	}
	wp := sp.writeOfLocked(tx)
	sp.records.coalesce()
	sp.records.advance()
	return wp, n
}

// writeOfLocked is the Write of a transition: the changed records, the share-partition's epochs, the
// start offset past the completed prefix and the count of completed records above it.
func (sp *SharePartition) writeOfLocked(tx *transition) sharestate.WritePartition {
	start := sp.records.completedPrefix()
	return sharestate.WritePartition{
		Partition:             sp.key.Partition,
		StateEpoch:            sp.stateEpoch,
		LeaderEpoch:           sp.leaderEpoch,
		StartOffset:           start,
		DeliveryCompleteCount: sp.records.completeCount(start),
		StateBatches:          tx.changed,
	}
}

// persist Writes a pending transition, then commits it, or rolls it back when the Write failed. It
// runs with writeMu held and mu not held.
func (sp *SharePartition) persist(ctx context.Context, tx *transition, wp sharestate.WritePartition) error {
	perr := sp.writeState(ctx, wp)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if perr == nil {
		sp.records.commit()
		return nil
	}
	sp.records.rollback(tx)
	if perr.Fenced {
		sp.fenceLocked(perr)
	}
	return perr
}
