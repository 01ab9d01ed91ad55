package sharestate

import (
	"strings"
	"testing"
)

var testTopic = TopicID{1, 2, 3}

func TestCheckWriteInputOrder(t *testing.T) {
	valid := WritePartition{Partition: 0, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: -1,
		StateBatches: []StateBatch{{FirstOffset: 0, LastOffset: 1, DeliveryState: DeliveryStateAcknowledged, DeliveryCount: 1}}}
	tests := []struct {
		name    string
		topic   TopicID
		mutate  func(*WritePartition)
		want    ErrorCode
		message string
	}{
		{"valid", testTopic, func(*WritePartition) {}, ErrNone, ""},
		// Every input is wrong at once: the first check in semantics §4's order names the error.
		{"topic first", TopicID{}, func(w *WritePartition) { w.Partition, w.LeaderEpoch, w.StateEpoch = -1, -1, -1 }, ErrInvalidRequest, "topic id"},
		{"then partition", testTopic, func(w *WritePartition) { w.Partition, w.LeaderEpoch, w.StateEpoch = -1, -1, -1 }, ErrInvalidRequest, "partition -1"},
		{"a partition no group can declare", testTopic, func(w *WritePartition) { w.Partition, w.LeaderEpoch = MaxPartitions, -1 }, ErrUnknownTopicOrPartition, "partition 1000000 is beyond"},
		{"the highest partition", testTopic, func(w *WritePartition) { w.Partition = MaxPartitions - 1 }, ErrNone, ""},
		{"then leader epoch", testTopic, func(w *WritePartition) { w.LeaderEpoch, w.StateEpoch = -1, -1 }, ErrInvalidRequest, "leader epoch -1"},
		{"then state epoch", testTopic, func(w *WritePartition) { w.StateEpoch, w.StartOffset = -1, -2 }, ErrInvalidRequest, "state epoch -1"},
		{"start offset below -1", testTopic, func(w *WritePartition) { w.StartOffset = -2 }, ErrInvalidRequest, "start offset -2"},
		{"delivery complete count below -1", testTopic, func(w *WritePartition) { w.DeliveryCompleteCount = -2 }, ErrInvalidRequest, "delivery complete count"},
		{"batch last below first", testTopic, func(w *WritePartition) { w.StateBatches[0].LastOffset = -1 }, ErrInvalidRequest, "state batch 0"},
		{"batch acquired", testTopic, func(w *WritePartition) { w.StateBatches[0].DeliveryState = DeliveryStateAcquired }, ErrInvalidRequest, "cannot be stored"},
		{"batch state 5", testTopic, func(w *WritePartition) { w.StateBatches[0].DeliveryState = 5 }, ErrInvalidRequest, "cannot be stored"},
		{"batch negative count", testTopic, func(w *WritePartition) { w.StateBatches[0].DeliveryCount = -1 }, ErrInvalidRequest, "negative delivery count"},
		{"batch negative offset", testTopic, func(w *WritePartition) { w.StateBatches[0].FirstOffset = -5 }, ErrInvalidRequest, "negative first offset"},
		{"too many batches", testTopic, func(w *WritePartition) { w.StateBatches = make([]StateBatch, 3) }, ErrInvalidRequest, "exceed the maximum of 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := valid
			w.StateBatches = append([]StateBatch(nil), valid.StateBatches...)
			tt.mutate(&w)
			o := CheckWriteInput(tt.topic, w, Limits{MaxBatchesPerWrite: 2, MaxStoredBatches: 10})
			if o.Code != tt.want || !strings.Contains(o.Message, tt.message) {
				t.Fatalf("got %s %q, want %s mentioning %q", o.Code, o.Message, tt.want, tt.message)
			}
		})
	}
}

func TestApplyWriteOrderAndEffect(t *testing.T) {
	stored := &State{StateEpoch: 5, LeaderEpoch: 5, StartOffset: 100, DeliveryCompleteCount: 3,
		Batches: []StateBatch{{FirstOffset: 100, LastOffset: 109, DeliveryState: DeliveryStateAvailable, DeliveryCount: 1}}}
	w := func(stateEpoch, leaderEpoch int32, start int64, dcc int32, batches ...StateBatch) WritePartition {
		return WritePartition{StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch, StartOffset: start, DeliveryCompleteCount: dcc, StateBatches: batches}
	}
	tests := []struct {
		name   string
		stored *State
		in     WritePartition
		known  bool
		want   ErrorCode
		check  func(t *testing.T, next State)
	}{
		{"uninitialized beats fencing and unknown", nil, w(0, 0, -1, -1), false, ErrInvalidRequest, nil},
		{"leader fence beats state fence", stored, w(4, 4, -1, -1), false, ErrFencedLeaderEpoch, nil},
		{"state fence beats unknown", stored, w(4, 5, -1, -1), false, ErrFencedStateEpoch, nil},
		{"unknown last", stored, w(5, 5, -1, -1), false, ErrUnknownTopicOrPartition, nil},
		{"higher epochs pass and change nothing", stored, w(9, 9, -1, -1), true, ErrNone, func(t *testing.T, next State) {
			if next.StateEpoch != 5 || next.LeaderEpoch != 5 {
				t.Errorf("epochs moved to %d/%d", next.StateEpoch, next.LeaderEpoch)
			}
		}},
		{"start offset never backwards", stored, w(5, 5, 50, -1), true, ErrNone, func(t *testing.T, next State) {
			if next.StartOffset != 100 {
				t.Errorf("start offset %d, want 100", next.StartOffset)
			}
		}},
		{"-1 keeps start and delivery complete count", stored, w(5, 5, -1, -1), true, ErrNone, func(t *testing.T, next State) {
			if next.StartOffset != 100 || next.DeliveryCompleteCount != 3 {
				t.Errorf("start %d dcc %d", next.StartOffset, next.DeliveryCompleteCount)
			}
		}},
		{"start moves up and prunes", stored, w(5, 5, 105, 0, StateBatch{FirstOffset: 105, LastOffset: 106, DeliveryState: DeliveryStateAcknowledged, DeliveryCount: 1}), true, ErrNone, func(t *testing.T, next State) {
			want := []StateBatch{{105, 106, DeliveryStateAcknowledged, 1}, {107, 109, DeliveryStateAvailable, 1}}
			if next.StartOffset != 105 || next.DeliveryCompleteCount != 0 || !equalBatches(next.Batches, want) {
				t.Errorf("got %+v", next)
			}
		}},
		{"a count sent with an older start offset is stale", stored, w(5, 5, 50, 9), true, ErrNone, func(t *testing.T, next State) {
			if next.StartOffset != 100 || next.DeliveryCompleteCount != 3 {
				t.Errorf("start %d dcc %d, want 100 and the stored 3", next.StartOffset, next.DeliveryCompleteCount)
			}
		}},
		{"at the stored start offset the count only rises", stored, w(5, 5, 100, 1), true, ErrNone, func(t *testing.T, next State) {
			if next.DeliveryCompleteCount != 3 {
				t.Errorf("dcc %d, want the stored 3", next.DeliveryCompleteCount)
			}
		}},
		{"at the stored start offset a higher count is taken", stored, w(5, 5, 100, 7), true, ErrNone, func(t *testing.T, next State) {
			if next.DeliveryCompleteCount != 7 {
				t.Errorf("dcc %d, want 7", next.DeliveryCompleteCount)
			}
		}},
		{"a start offset moved up without a count leaves it unknown", stored, w(5, 5, 105, -1), true, ErrNone, func(t *testing.T, next State) {
			if next.StartOffset != 105 || next.DeliveryCompleteCount != -1 {
				t.Errorf("start %d dcc %d, want 105 and -1: the stored 3 counted from 100", next.StartOffset, next.DeliveryCompleteCount)
			}
		}},
		{"too many stored batches", stored, w(5, 5, -1, -1, alternating(100, 12)...), true, ErrInvalidRequest, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, o := ApplyWrite(tt.stored, tt.in, tt.known, Limits{MaxBatchesPerWrite: 100, MaxStoredBatches: 10})
			if o.Code != tt.want {
				t.Fatalf("got %s %q, want %s", o.Code, o.Message, tt.want)
			}
			if tt.check != nil {
				tt.check(t, next)
			}
		})
	}
}

func TestApplyRead(t *testing.T) {
	stored := &State{StateEpoch: 2, LeaderEpoch: 3, StartOffset: 10}
	if _, _, o := ApplyRead(nil, ReadPartition{LeaderEpoch: 1}, false); o.Code != ErrInvalidRequest {
		t.Errorf("read of nothing: %s", o.Code)
	}
	if _, _, o := ApplyRead(stored, ReadPartition{LeaderEpoch: 2}, false); o.Code != ErrFencedLeaderEpoch {
		t.Errorf("older leader: %s", o.Code)
	}
	if _, _, o := ApplyRead(stored, ReadPartition{LeaderEpoch: 3}, false); o.Code != ErrUnknownTopicOrPartition {
		t.Errorf("unknown: %s", o.Code)
	}
	if next, raised, o := ApplyRead(stored, ReadPartition{LeaderEpoch: 3}, true); !o.OK() || raised || next.LeaderEpoch != 3 {
		t.Errorf("same leader epoch: %v %v %+v", o, raised, next)
	}
	if next, raised, o := ApplyRead(stored, ReadPartition{LeaderEpoch: 7}, true); !o.OK() || !raised || next.LeaderEpoch != 7 {
		t.Errorf("higher leader epoch: %v %v %+v", o, raised, next)
	}
	if o := CheckReadInput(testTopic, ReadPartition{LeaderEpoch: -1}); o.Code != ErrInvalidRequest {
		t.Errorf("negative leader epoch: %s", o.Code)
	}
}

func TestApplyInitialize(t *testing.T) {
	progressed := &State{StateEpoch: 2, LeaderEpoch: 3, StartOffset: 10, DeliveryCompleteCount: 4,
		Batches: []StateBatch{{FirstOffset: 10, LastOffset: 19, DeliveryState: DeliveryStateAcknowledged, DeliveryCount: 1}}}
	tests := []struct {
		name   string
		stored *State
		in     InitializePartition
		known  bool
		want   ErrorCode
		next   State // the state after it; on an error, the stored one
	}{
		{"older state epoch beats unknown", progressed, InitializePartition{StateEpoch: 1}, false, ErrFencedStateEpoch, *progressed},
		{"unknown partition", progressed, InitializePartition{StateEpoch: 2}, false, ErrUnknownTopicOrPartition, *progressed},
		{"unknown partition without state", nil, InitializePartition{StateEpoch: 2}, false, ErrUnknownTopicOrPartition, State{}},
		// Kafka's coordinator fences only a lower state epoch and writes a fresh state at an equal one
		// (semantics §5): the progress is gone, the start offset may go down, the leader-epoch fence stays.
		{"equal state epoch, lower start offset", progressed, InitializePartition{StateEpoch: 2, StartOffset: 0}, true, ErrNone,
			State{StateEpoch: 2, LeaderEpoch: 3, StartOffset: 0, DeliveryCompleteCount: 0}},
		{"equal state epoch, same start offset", progressed, InitializePartition{StateEpoch: 2, StartOffset: 10}, true, ErrNone,
			State{StateEpoch: 2, LeaderEpoch: 3, StartOffset: 10, DeliveryCompleteCount: 0}},
		{"equal state epoch, start offset unset", progressed, InitializePartition{StateEpoch: 2, StartOffset: -1}, true, ErrNone,
			State{StateEpoch: 2, LeaderEpoch: 3, StartOffset: -1, DeliveryCompleteCount: -1}},
		{"higher state epoch", progressed, InitializePartition{StateEpoch: 3, StartOffset: -1}, true, ErrNone,
			State{StateEpoch: 3, LeaderEpoch: 3, StartOffset: -1, DeliveryCompleteCount: -1}},
		{"no state: leader epoch 0", nil, InitializePartition{StateEpoch: 3}, true, ErrNone, State{StateEpoch: 3}},
		{"no state, a set start offset starts the count at 0", nil, InitializePartition{StateEpoch: 0, StartOffset: 5}, true, ErrNone,
			State{StartOffset: 5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, o := ApplyInitialize(tt.stored, tt.in, tt.known)
			if o.Code != tt.want {
				t.Fatalf("got %s %q, want %s", o.Code, o.Message, tt.want)
			}
			if !sameState(next, tt.next) {
				t.Fatalf("got %+v, want %+v", next, tt.next)
			}
		})
	}
}

// Two offset resets in a row at the group's unchanged epoch, as Kafka's group coordinator sends them
// (alterShareGroupOffsets initializes at the group epoch), each start a fresh state.
func TestInitializeTwiceAtOneStateEpoch(t *testing.T) {
	const epoch = 4
	st, o := ApplyInitialize(nil, InitializePartition{StateEpoch: epoch, StartOffset: -1}, true)
	if !o.OK() {
		t.Fatal(o)
	}
	if st, _, o = ApplyRead(&st, ReadPartition{LeaderEpoch: 7}, true); !o.OK() {
		t.Fatal(o)
	}
	// Each reset goes below the progress written since the last one.
	for i, start := range []int64{100, 40} {
		if st, o = ApplyWrite(&st, WritePartition{StateEpoch: epoch, LeaderEpoch: 7, StartOffset: 200, DeliveryCompleteCount: 2,
			StateBatches: []StateBatch{{FirstOffset: 200, LastOffset: 209, DeliveryState: DeliveryStateAcknowledged, DeliveryCount: 1}}},
			true, DefaultLimits); !o.OK() || st.StartOffset != 200 || len(st.Batches) != 1 {
			t.Fatalf("write %d: %v %+v", i, o, st)
		}
		if st, o = ApplyInitialize(&st, InitializePartition{StateEpoch: epoch, StartOffset: start}, true); !o.OK() {
			t.Fatalf("reset %d: %v", i, o)
		}
		want := State{StateEpoch: epoch, LeaderEpoch: 7, StartOffset: start}
		if !sameState(st, want) {
			t.Fatalf("reset %d to %d: got %+v, want %+v", i, start, st, want)
		}
	}
}

// sameState compares two states, batches included.
func sameState(a, b State) bool {
	return a.StateEpoch == b.StateEpoch && a.LeaderEpoch == b.LeaderEpoch && a.StartOffset == b.StartOffset &&
		a.DeliveryCompleteCount == b.DeliveryCompleteCount && equalBatches(a.Batches, b.Batches)
}

func TestCheckInitializeInputAndSummary(t *testing.T) {
	if o := CheckInitializeInput(testTopic, InitializePartition{StateEpoch: -1}); o.Code != ErrInvalidRequest {
		t.Errorf("negative state epoch: %s", o.Code)
	}
	if o := CheckInitializeInput(testTopic, InitializePartition{StateEpoch: MaxStateEpoch}); o.Code != ErrInvalidRequest {
		t.Errorf("a state epoch with no room for a fence: %s", o.Code)
	}
	if o := CheckInitializeInput(testTopic, InitializePartition{StateEpoch: MaxStateEpoch - 1}); !o.OK() {
		t.Errorf("the highest state epoch with room for a fence: %s", o.Code)
	}

	if s := SummaryOf(nil); s.StateEpoch != 0 || s.LeaderEpoch != 0 || s.StartOffset != -1 || s.DeliveryCompleteCount != -1 {
		t.Errorf("summary of nothing: %+v", s)
	}
}

func TestInFlightRecords(t *testing.T) {
	batches := []StateBatch{{0, 9, DeliveryStateAvailable, 1}, {10, 14, DeliveryStateAcknowledged, 1}, {15, 15, DeliveryStateArchiving, 1}, {16, 20, DeliveryStateArchived, 2}}
	if got := InFlightRecords(batches); got != 11 {
		t.Errorf("got %d, want 11", got)
	}
	if got := InFlightRecords([]StateBatch{{0, 1 << 62, 0, 0}, {1<<62 + 1, 1<<63 - 1, 0, 0}}); got != 1<<63-1 {
		t.Errorf("saturation: got %d", got)
	}
}

func alternating(from int64, n int) []StateBatch {
	out := make([]StateBatch, n)
	for i := range out {
		out[i] = StateBatch{FirstOffset: from + int64(i), LastOffset: from + int64(i), DeliveryState: DeliveryState(2 * (i % 2)), DeliveryCount: 1}
	}
	return out
}

func equalBatches(a, b []StateBatch) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
