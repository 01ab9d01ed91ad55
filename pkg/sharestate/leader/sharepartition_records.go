package leader

import (
	"math"
	"slices"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// This file is the share-partition leader's in-memory record state: which offsets are AVAILABLE,
// ACQUIRED (by whom, until when), ACKNOWLEDGED or ARCHIVED, and how often each was delivered. It is
// a run-length model, like the stored state batches, so that a stored batch spanning many offsets
// costs one entry. Nothing here locks: the SharePartition guards it.

// span is a run of offsets [first, last] whose records share one state, delivery count, holder and
// lock deadline.
type span struct {
	first, last int64
	state       sharestate.DeliveryState
	count       int16
	// member holds the records while they are ACQUIRED; empty otherwise.
	member string
	// deadline is when an ACQUIRED record's acquisition lock expires.
	deadline time.Time
	// pending marks records whose transition waits for its Write: nobody may touch them until it is
	// committed or rolled back.
	pending bool
}

// same reports whether two spans may be coalesced into one.
func (s span) same(o span) bool {
	return s.state == o.state && s.count == o.count && s.member == o.member &&
		s.deadline.Equal(o.deadline) && s.pending == o.pending
}

// batch is the span as the persister stores it.
func (s span) batch() sharestate.StateBatch {
	return sharestate.StateBatch{FirstOffset: s.first, LastOffset: s.last, DeliveryState: s.state, DeliveryCount: s.count}
}

// completed reports whether the span's records need no further delivery.
func (s span) completed() bool {
	return s.state == sharestate.DeliveryStateAcknowledged || s.state == sharestate.DeliveryStateArchived
}

// inflight is the record state from the start offset up to end (exclusive): spans sorted by offset
// that cover [start, end) exactly, without gaps or overlaps. Offsets at or above end have never been
// handed out by this leader nor stored: they are AVAILABLE with delivery count 0.
type inflight struct {
	start int64
	end   int64
	spans []span
}

// loadInflight builds the record state from a Read's start offset and stored batches, which must be
// sorted, non-overlapping and at or above start. Offsets the batches leave out are AVAILABLE and were
// never delivered.
func loadInflight(start int64, batches []sharestate.StateBatch) inflight {
	f := inflight{start: start, end: start}
	for _, b := range batches {
		if b.FirstOffset > f.end {
			f.spans = append(f.spans, span{first: f.end, last: b.FirstOffset - 1, state: sharestate.DeliveryStateAvailable})
		}
		state := b.DeliveryState
		if state == sharestate.DeliveryStateArchiving {
			// Dead-letter queues are not supported: a record on its way there is treated as there.
			state = sharestate.DeliveryStateArchived
		}
		f.spans = append(f.spans, span{first: b.FirstOffset, last: b.LastOffset, state: state, count: b.DeliveryCount})
		f.end = b.LastOffset + 1
	}
	f.coalesce()
	f.advance()
	return f
}

// find returns the index of the span holding off, or -1.
func (f *inflight) find(off int64) int {
	i, found := slices.BinarySearchFunc(f.spans, off, func(s span, off int64) int {
		switch {
		case s.last < off:
			return -1
		case s.first > off:
			return 1
		default:
			return 0
		}
	})
	if !found {
		return -1
	}
	return i
}

// splitAt makes off the first offset of a span, when a span holds it past its start.
func (f *inflight) splitAt(off int64) {
	i := f.find(off)
	if i < 0 || f.spans[i].first == off {
		return
	}
	head, tail := f.spans[i], f.spans[i]
	head.last, tail.first = off-1, off
	f.spans[i] = head
	f.spans = slices.Insert(f.spans, i+1, tail)
}

// slice splits the spans at first and last+1 and returns the index range [i, j) of the spans that
// cover [first, last]. The range must lie within [start, end).
func (f *inflight) slice(first, last int64) (i, j int) {
	f.splitAt(first)
	if last < math.MaxInt64 {
		f.splitAt(last + 1)
	}
	i = f.find(first)
	j = f.find(last) + 1
	return i, j
}

// replace puts with in place of the records [first, last].
func (f *inflight) replace(first, last int64, with ...span) {
	i, j := f.slice(first, last)
	f.spans = slices.Replace(f.spans, i, j, with...)
}

// coalesce merges neighbouring spans that hold the same state.
func (f *inflight) coalesce() {
	out := f.spans[:0]
	for _, s := range f.spans {
		if n := len(out); n > 0 && out[n-1].same(s) && out[n-1].last+1 == s.first {
			out[n-1].last = s.last
			continue
		}
		out = append(out, s)
	}
	clear(f.spans[len(out):])
	f.spans = out
}

// completedPrefix returns the offset after the leading run of completed records: the start offset
// once they are dropped.
func (f *inflight) completedPrefix() int64 {
	next := f.start
	for _, s := range f.spans {
		if !s.completed() {
			break
		}
		next = s.last + 1
	}
	return next
}

// advance moves the start offset past the completed prefix and forgets it.
func (f *inflight) advance() {
	next := f.completedPrefix()
	if next == f.start {
		return
	}
	i := 0
	for i < len(f.spans) && f.spans[i].last < next {
		i++
	}
	f.spans = slices.Delete(f.spans, 0, i)
	f.start = next
}

// completeCount counts the completed records at or above from (Write v1's deliveryCompleteCount),
// saturating at MaxInt32.
func (f *inflight) completeCount(from int64) int32 {
	var n int64
	for _, s := range f.spans {
		if !s.completed() || s.last < from {
			continue
		}
		n += s.last - max(s.first, from) + 1
		if n >= math.MaxInt32 {
			return math.MaxInt32
		}
	}
	return int32(n)
}

// heldBy reports whether every record of [first, last] is tracked and ACQUIRED by member, with no
// transition pending.
func (f *inflight) heldBy(first, last int64, member string) bool {
	if first < f.start || last >= f.end {
		return false
	}
	for i := f.find(first); i < len(f.spans) && f.spans[i].first <= last; i++ {
		s := f.spans[i]
		if s.state != sharestate.DeliveryStateAcquired || s.member != member || s.pending {
			return false
		}
	}
	return true
}

// acquire hands out up to maxRecords AVAILABLE records below limit to member, in offset order,
// raising each one's delivery count. It returns what it handed out, as runs of one delivery count.
func (f *inflight) acquire(member string, limit int64, maxRecords int, deadline time.Time) []AcquiredRecords {
	var out []AcquiredRecords
	left := int64(maxRecords)
	take := func(s span) span {
		s.state, s.count, s.member, s.deadline = sharestate.DeliveryStateAcquired, nextCount(s.count), member, deadline
		out = appendAcquired(out, s)
		left -= s.last - s.first + 1
		return s
	}
	for i := 0; i < len(f.spans) && left > 0 && f.spans[i].first < limit; i++ {
		s := f.spans[i]
		if s.state != sharestate.DeliveryStateAvailable || s.pending {
			continue
		}
		last := min(s.last, limit-1, s.first+left-1)
		f.splitAt(last + 1)
		f.spans[i] = take(f.spans[i])
	}
	if left > 0 && f.end < limit {
		last := min(limit-1, f.end+left-1)
		f.spans = append(f.spans, take(span{first: f.end, last: last, state: sharestate.DeliveryStateAvailable}))
		f.end = last + 1
	}
	f.coalesce()
	return out
}

// nextCount is a delivery count after one more delivery; it saturates rather than wrap.
func nextCount(c int16) int16 {
	if c == math.MaxInt16 {
		return c
	}
	return c + 1
}

// appendAcquired adds s to the acquired runs, extending the last run when s continues it.
func appendAcquired(out []AcquiredRecords, s span) []AcquiredRecords {
	if n := len(out); n > 0 && out[n-1].LastOffset+1 == s.first && out[n-1].DeliveryCount == s.count {
		out[n-1].LastOffset = s.last
		return out
	}
	return append(out, AcquiredRecords{FirstOffset: s.first, LastOffset: s.last, DeliveryCount: s.count})
}

// transition collects an in-memory change of records: the spans as they were, to put back if its
// Write fails, and the changed records as the Write carries them.
type transition struct {
	undo    []span
	changed []sharestate.StateBatch
}

// change applies to to every span of [first, last], recording the change in tx. pending marks the
// changed records as waiting for tx's Write.
func (f *inflight) change(first, last int64, tx *transition, pending bool, to func(span) span) {
	i, j := f.slice(first, last)
	for k := i; k < j; k++ {
		tx.undo = append(tx.undo, f.spans[k])
		f.spans[k] = to(f.spans[k])
		f.spans[k].pending = pending
		tx.changed = appendBatch(tx.changed, f.spans[k].batch())
	}
}

// appendBatch adds b to batches, extending the last batch when b continues it with the same state
// and count.
func appendBatch(batches []sharestate.StateBatch, b sharestate.StateBatch) []sharestate.StateBatch {
	if n := len(batches); n > 0 {
		p := &batches[n-1]
		if p.LastOffset+1 == b.FirstOffset && p.DeliveryState == b.DeliveryState && p.DeliveryCount == b.DeliveryCount {
			p.LastOffset = b.LastOffset
			return batches
		}
	}
	return append(batches, b)
}

// rollback puts back what tx changed.
func (f *inflight) rollback(tx *transition) {
	for _, s := range tx.undo {
		f.replace(s.first, s.last, s)
	}
	f.coalesce()
}

// commit makes the pending transition final and advances the start offset.
func (f *inflight) commit() {
	for i := range f.spans {
		f.spans[i].pending = false
	}
	f.coalesce()
	f.advance()
}

// acquiredBy returns the ranges member holds with no transition pending.
func (f *inflight) acquiredBy(member string) [][2]int64 {
	var out [][2]int64
	for _, s := range f.spans {
		if s.state == sharestate.DeliveryStateAcquired && s.member == member && !s.pending {
			out = append(out, [2]int64{s.first, s.last})
		}
	}
	return out
}

// expired returns the ranges whose acquisition lock ended at or before now, with no transition
// pending.
func (f *inflight) expired(now time.Time) [][2]int64 {
	var out [][2]int64
	for _, s := range f.spans {
		if s.state == sharestate.DeliveryStateAcquired && !s.pending && !s.deadline.After(now) {
			out = append(out, [2]int64{s.first, s.last})
		}
	}
	return out
}
