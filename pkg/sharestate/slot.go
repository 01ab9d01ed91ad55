package sharestate

import (
	"sync"

	v1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// slot is the persister's memory of one share-partition: the object it last read or wrote (so the
// steady-state write needs no GET), and the writes queued behind the status update in flight (group
// commit: they all go into the next update, each caller getting its own answer).
type slot struct {
	key partitionKey

	mu       sync.Mutex
	cached   *v1.SharePartitionState // nil: unknown, read it first
	queue    []*pendingWrite
	flushing bool // a goroutine is committing this slot's queue
}

// pendingWrite is one partition's Write waiting in a slot's queue.
type pendingWrite struct {
	req   WritePartition
	known bool         // spec §6, looked up before queueing
	done  chan Outcome // buffered: the committer never blocks on a caller that left
}

func (s *slot) cachedObject() *v1.SharePartitionState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cached
}

// remember keeps obj (nil: forget) as the partition's last known object.
func (s *slot) remember(obj *v1.SharePartitionState) {
	s.mu.Lock()
	s.cached = obj
	s.mu.Unlock()
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

// slotTable holds the slots, evicting idle ones beyond a bound so memory stays bounded however many
// partitions a persister has served.
type slotTable struct {
	mu    sync.Mutex
	slots map[partitionKey]*slot
	max   int
}

func newSlotTable(max int) *slotTable {
	return &slotTable{slots: map[partitionKey]*slot{}, max: max}
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
	s := &slot{key: key}
	t.slots[key] = s
	return s
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
			delete(t.slots, key)
		}
	}
}
