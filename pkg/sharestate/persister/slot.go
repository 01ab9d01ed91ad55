package persister

import (
	"sync"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// slot is the persister's memory of one share-partition: the object it last read or wrote (so the
// steady-state write needs no GET), and the writes queued behind the status update in flight (group
// commit: they all go into the next update, each caller getting its own answer).
type slot struct {
	key   partitionKey
	table *slotTable // nil in tests of a lone slot

	mu          sync.Mutex
	cached      *sharestatev1.SharePartitionState // nil: unknown, read it first
	cachedBytes int64                             // objectBytes(cached), counted in table.bytes
	queue       []*pendingWrite
	flushing    bool // a goroutine is committing this slot's queue
}

// pendingWrite is one partition's Write waiting in a slot's queue.
type pendingWrite struct {
	req   sharestate.WritePartition
	known bool     // semantics §6, looked up before queueing
	id    Identity // the broker that sent the write, recorded as leader
	// podFenced, set by the committer before it answers, says the answer is the refusal of id's pod
	// as the fenced leader (semantics §9).
	podFenced bool
	done      chan sharestate.Outcome // buffered: the committer never blocks on a caller that left
}

func (s *slot) cachedObject() *sharestatev1.SharePartitionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cached
}

// remember keeps obj (nil: forget) as the partition's last known object, and has the table give back
// memory if the cache is now above its bound in bytes.
func (s *slot) remember(obj *sharestatev1.SharePartitionState) {
	size := objectBytes(obj)
	s.mu.Lock()
	delta := size - s.cachedBytes
	s.cached, s.cachedBytes = obj, size
	s.mu.Unlock()
	if s.table != nil {
		s.table.account(delta, s)
	}
}

// forgetIfIdle drops the cached object of an idle slot and returns the bytes it held; a busy slot's
// committer is about to use its object, and keeps it.
func (s *slot) forgetIfIdle() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.flushing || len(s.queue) > 0 || s.cached == nil {
		return 0
	}
	freed := s.cachedBytes
	s.cached, s.cachedBytes = nil, 0
	return freed
}

// enqueue queues w; it returns false when the queue is full, and start says whether the caller must
// start a committer for the slot.
func (s *slot) enqueue(w *pendingWrite, limit int) (queued, start bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) >= limit {
		return false, false
	}
	s.queue = append(s.queue, w)
	start = !s.flushing
	s.flushing = true
	return true, start
}

// take removes up to n queued writes; when none is left it marks the committer done and returns nil.
func (s *slot) take(n int) []*pendingWrite {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		s.flushing = false
		s.queue = nil // release the backing array of a burst
		return nil
	}
	n = min(n, len(s.queue))
	taken := s.queue[:n:n]
	s.queue = s.queue[n:]
	return taken
}

func (s *slot) idle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.flushing && len(s.queue) == 0
}

// slotTable holds the slots. Memory stays bounded however many partitions a persister has served:
// beyond max slots, idle ones are dropped; beyond maxBytes of cached objects, idle slots' objects are
// dropped (their next write reads the object first: one GET, no loss of correctness, since every
// write is conditional on the resourceVersion it read).
type slotTable struct {
	mu       sync.Mutex
	slots    map[partitionKey]*slot
	max      int
	maxBytes int64
	bytes    int64 // the cached objects' objectBytes, summed; under mu
}

func newSlotTable(max int, maxBytes int64) *slotTable {
	return &slotTable{slots: map[partitionKey]*slot{}, max: max, maxBytes: maxBytes}
}

func (t *slotTable) get(key partitionKey) *slot {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.slots[key]; ok {
		return s
	}
	if len(t.slots) >= t.max {
		t.evictIdle()
	}
	s := &slot{key: key, table: t}
	t.slots[key] = s
	return s
}

// cachedBytes returns the bytes the cached objects hold, as objectBytes counts them.
func (t *slotTable) cachedBytes() int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes
}

// account adds delta to the cached bytes (changed slot) and, above maxBytes, drops idle slots' cached
// objects (map order, so in effect at random) until a tenth of the budget is free. The slot that just
// remembered its object is spared: its caller is about to use it.
func (t *slotTable) account(delta int64, changed *slot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bytes += delta
	if t.bytes <= t.maxBytes {
		return
	}
	target := t.maxBytes - t.maxBytes/10
	for _, s := range t.slots {
		if t.bytes <= target {
			return
		}
		if s != changed {
			t.bytes -= s.forgetIfIdle()
		}
	}
}

// evictIdle drops idle slots (map order, so in effect at random) until a tenth of the table is free.
// A busy slot is never dropped: its queued writers hold it.
func (t *slotTable) evictIdle() {
	target := t.max - t.max/10 - 1
	for key, s := range t.slots {
		if len(t.slots) <= target {
			return
		}
		if s.idle() {
			t.bytes -= s.forgetIfIdle()
			delete(t.slots, key)
		}
	}
}

// objectBytes estimates the heap a cached object holds, on the high side: a fixed part for its
// metadata (managed fields apart), conditions, leader and times, and per stored batch its string's
// bytes rounded up to the allocator's 16-byte size classes plus 24 bytes for its string header and
// the spare capacity the JSON decoder leaves in the slice. A test checks the estimate against the heap
// that objects decoded from the API server's JSON really take.
func objectBytes(obj *sharestatev1.SharePartitionState) int64 {
	if obj == nil {
		return 0
	}
	n := int64(objectFixedBytes)
	for _, f := range obj.ManagedFields {
		n += 256
		if f.FieldsV1 != nil {
			n += f.FieldsV1.GetRawReader().Size()
		}
	}
	for _, b := range obj.Status.StateBatches {
		n += 24 + (int64(len(b))+15)&^15
	}
	return n
}

// objectFixedBytes is objectBytes' allowance for everything but the batches and managed fields.
const objectFixedBytes = 2048
