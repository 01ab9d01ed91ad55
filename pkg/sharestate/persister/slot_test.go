package persister

import (
	"testing"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

func TestSlotQueueIsBounded(t *testing.T) {
	s := &slot{}
	w := func() *pendingWrite { return &pendingWrite{done: make(chan sharestate.Outcome, 1)} }
	if queued, start := s.enqueue(w(), 2); !queued || !start {
		t.Fatalf("first write: queued %v start %v, want both", queued, start)
	}
	if queued, start := s.enqueue(w(), 2); !queued || start {
		t.Fatalf("second write: queued %v start %v, want queued behind the committer", queued, start)
	}
	if queued, _ := s.enqueue(w(), 2); queued {
		t.Fatal("a third write was queued past the bound of 2")
	}
	if got := s.take(10); len(got) != 2 {
		t.Fatalf("took %d, want 2", len(got))
	}
	if got := s.take(10); got != nil || !s.idle() {
		t.Fatalf("an empty queue must end the committer: %v, idle %v", got, s.idle())
	}
}

func TestSlotTableEvictsOnlyIdleSlots(t *testing.T) {
	table := newSlotTable(10, 1<<30)
	busy := table.get(partitionKey{group: "busy"})
	busy.enqueue(&pendingWrite{done: make(chan sharestate.Outcome, 1)}, 10)
	for i := range 50 {
		table.get(partitionKey{group: "g", partition: int32(i)})
	}
	if len(table.slots) > 10 {
		t.Fatalf("%d slots kept, bound 10", len(table.slots))
	}
	if table.get(partitionKey{group: "busy"}) != busy {
		t.Fatal("a slot with queued writes was evicted")
	}
}
