package sharestate

import (
	"cmp"
	"math"
	"slices"
)

// CombineBatches merges the stored batches with the incoming ones of a Write, following semantics §7:
//
//  1. when startOffset is not -1, offsets below it are dropped from both inputs alike;
//  2. where batches overlap, per offset the highest priority wins, whichever input it came from:
//     the higher delivery count, then on equal counts the higher delivery state byte;
//  3. touching neighbours with the same state and count are coalesced; uncovered offsets stay gaps.
//
// The result is sorted by first offset, non-overlapping and as short as possible; it is nil when no
// offset remains. Either input may be unsorted and may overlap itself. Neither input is modified,
// and the result shares no memory with them. The batches are expected to be valid
// (StateBatch.Validate); one whose last offset is below its first covers no offset and so
// contributes nothing.
//
// Offsets are never expanded one by one: a batch may span 2^62 offsets. The work is a sweep over
// batch boundaries, O((n+m) log(n+m)) in general. When both inputs are already sorted and neither
// overlaps itself, which is the usual Write (a sorted stored list and a few new batches), it is
// O(n+m) and allocates only the result.
func CombineBatches(stored, incoming []StateBatch, startOffset int64) []StateBatch {
	// Pruning (step 1) clips every batch to [startOffset, ∞). Since the winner at an offset depends
	// only on the batches that cover it, that is the same as sweeping from startOffset on and
	// ignoring what lies below, which needs no clipped copies.
	from := int64(math.MinInt64)
	if startOffset != -1 {
		from = startOffset
	}
	return sweep(mergeQueue{a: sortedByFirst(stored), b: sortedByFirst(incoming)}, from)
}

// sortedByFirst returns the batches in first-offset order: the slice itself when it is already in
// order (stored batches always are), found by an O(n) check, or else a sorted copy.
func sortedByFirst(batches []StateBatch) []StateBatch {
	if slices.IsSortedFunc(batches, compareFirst) {
		return batches
	}
	sorted := slices.Clone(batches)
	slices.SortFunc(sorted, compareFirst)
	return sorted
}

func compareFirst(a, b StateBatch) int {
	return cmp.Compare(a.FirstOffset, b.FirstOffset)
}

// mergeQueue yields the batches of two lists, each sorted by first offset, in first-offset order.
// Merging on the fly, rather than sorting the concatenation, keeps the usual Write linear and
// copies nothing. It only reads the lists.
type mergeQueue struct{ a, b []StateBatch }

// takeA reports whether the next batch comes from a. Ties go to a; the order among batches that
// start at the same offset does not matter, as they are all admitted at once.
func (q *mergeQueue) takeA() bool {
	return len(q.b) == 0 || (len(q.a) > 0 && q.a[0].FirstOffset <= q.b[0].FirstOffset)
}

// head returns the next batch, without removing it; ok is false when both lists are exhausted.
func (q *mergeQueue) head() (b StateBatch, ok bool) {
	switch {
	case q.takeA() && len(q.a) > 0:
		return q.a[0], true
	case len(q.b) > 0:
		return q.b[0], true
	default:
		return StateBatch{}, false
	}
}

// advance removes the batch head returned.
func (q *mergeQueue) advance() {
	if q.takeA() {
		q.a = q.a[1:]
	} else {
		q.b = q.b[1:]
	}
}

func (q *mergeQueue) len() int { return len(q.a) + len(q.b) }

// sweep walks the queued batches, which may overlap, upwards from offset from. At every offset
// the winner is the highest-priority batch among those that cover it, kept at the top of a heap.
// The winner can only change where a batch ends or another begins, so each step emits the run up
// to the nearer of the two: the winner's last offset or the offset before the next batch's first.
// Each step ends a batch or admits at least one, so there are at most 2(n+m) steps.
func sweep(queue mergeQueue, from int64) []StateBatch {
	var (
		// Sized for the usual case, where runs and batches are about as many; the rare result
		// with more runs (winners splitting losers) grows it.
		out    = make([]StateBatch, 0, queue.len())
		active batchHeap
		pos    = from // the lowest offset not yet decided
	)
	for {
		// Batches that ended below pos no longer cover anything; they are removed lazily, only
		// once they reach the top, which is the only place they could do harm.
		for len(active) > 0 && active[0].LastOffset < pos {
			active = active.pop()
		}
		next, more := queue.head()
		if len(active) == 0 {
			if !more {
				break
			}
			// Nothing covers pos: jump over the gap, which stays a gap.
			pos = max(pos, next.FirstOffset)
		}
		for more && next.FirstOffset <= pos {
			// A batch that ends below pos (below the start offset, or empty) covers nothing
			// that is still to be decided.
			if next.LastOffset >= pos {
				active = active.push(next)
			}
			queue.advance()
			next, more = queue.head()
		}
		if len(active) == 0 {
			continue
		}

		winner := active[0]
		end := winner.LastOffset
		if more && next.FirstOffset <= end {
			end = next.FirstOffset - 1
		}
		out = appendCoalesced(out, StateBatch{
			FirstOffset:   pos,
			LastOffset:    end,
			DeliveryState: winner.DeliveryState,
			DeliveryCount: winner.DeliveryCount,
		})
		if end == math.MaxInt64 {
			// No offset exists beyond; pos = end+1 would wrap around to a negative offset.
			break
		}
		pos = end + 1
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// appendCoalesced appends a run that starts above every run already in out, extending the last one
// instead when the two touch and share state and count. Runs are produced in offset order, so
// checking the last one is enough to make the output minimal (semantics §7 steps 3 and 4).
func appendCoalesced(out []StateBatch, run StateBatch) []StateBatch {
	if n := len(out); n > 0 {
		last := &out[n-1]
		if last.LastOffset+1 == run.FirstOffset &&
			last.DeliveryState == run.DeliveryState && last.DeliveryCount == run.DeliveryCount {
			last.LastOffset = run.LastOffset
			return out
		}
	}
	return append(out, run)
}

// outranks reports whether batch a wins over batch b at an offset they both cover (semantics §7 step 2):
// the higher delivery count wins, and on equal counts the higher delivery state byte, so that
// ARCHIVED (4) > ARCHIVING (3) > ACKNOWLEDGED (2) > AVAILABLE (0).
func outranks(a, b StateBatch) bool {
	if a.DeliveryCount != b.DeliveryCount {
		return a.DeliveryCount > b.DeliveryCount
	}
	return a.DeliveryState > b.DeliveryState
}

// batchHeap is a binary max-heap of batches by priority (outranks). It is written out rather than
// built on container/heap, whose interface boxes every pushed value into an allocation. Like
// append, push and pop return the updated slice: the sweep keeps it in a local variable, and
// storing through a pointer instead would cost a GC write barrier on every call.
type batchHeap []StateBatch

func (h batchHeap) push(b StateBatch) batchHeap {
	h = append(h, b)
	for i := len(h) - 1; i > 0; {
		parent := (i - 1) / 2
		if !outranks(h[i], h[parent]) {
			break
		}
		h[i], h[parent] = h[parent], h[i]
		i = parent
	}
	return h
}

// pop removes the top batch.
func (h batchHeap) pop() batchHeap {
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		best, left, right := i, 2*i+1, 2*i+2
		if left < n && outranks(h[left], h[best]) {
			best = left
		}
		if right < n && outranks(h[right], h[best]) {
			best = right
		}
		if best == i {
			return h
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
}
