package sharestate

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// sb builds a batch tersely for the tables below.
func sb(first, last int64, state DeliveryState, count int16) StateBatch {
	return StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: count}
}

// bs builds a batch list tersely for the tables below.
func bs(batches ...StateBatch) []StateBatch { return batches }

const (
	avail = DeliveryStateAvailable
	acked = DeliveryStateAcknowledged
	archg = DeliveryStateArchiving
	archd = DeliveryStateArchived
)

func TestCombineBatches(t *testing.T) {
	const maxOff = math.MaxInt64
	// Each case reads: its name; stored, incoming, start offset; the expected result.
	tests := []struct {
		name     string
		stored   []StateBatch
		incoming []StateBatch
		start    int64
		want     []StateBatch
	}{
		// The worked examples of semantics §7, in its order.
		{
			"spec: new batches split a stored one and keep its tail",
			bs(sb(111, 120, avail, 1)), bs(sb(111, 113, avail, 2), sb(114, 114, acked, 1), sb(115, 119, avail, 2)), -1,
			bs(sb(111, 113, avail, 2), sb(114, 114, acked, 1), sb(115, 119, avail, 2), sb(120, 120, avail, 1)),
		},
		{
			"spec: equal count, higher state wins the overlap",
			bs(sb(100, 109, avail, 1)), bs(sb(100, 104, acked, 1)), -1,
			bs(sb(100, 104, acked, 1), sb(105, 109, avail, 1)),
		},
		{
			"spec: lower count loses whatever its state",
			bs(sb(100, 109, avail, 3)), bs(sb(100, 109, acked, 1)), -1,
			bs(sb(100, 109, avail, 3)),
		},
		{
			"spec: touching equal neighbours coalesce",
			bs(sb(100, 104, acked, 1), sb(105, 109, acked, 1)), nil, -1,
			bs(sb(100, 109, acked, 1)),
		},
		{
			"spec: a gap stays a gap",
			bs(sb(100, 109, avail, 1)), bs(sb(120, 129, avail, 1)), -1,
			bs(sb(100, 109, avail, 1), sb(120, 129, avail, 1)),
		},
		{
			"spec: start offset clips a straddling batch",
			bs(sb(100, 109, acked, 1), sb(110, 119, avail, 1)), nil, 105,
			bs(sb(105, 109, acked, 1), sb(110, 119, avail, 1)),
		},
		{
			"spec: start offset beyond everything leaves nothing",
			bs(sb(100, 109, acked, 1)), bs(sb(95, 99, archd, 1)), 110,
			nil,
		},

		// Empty inputs.
		{"both empty", nil, nil, -1, nil},
		{"both empty with a start offset", nil, nil, 7, nil},
		{"only incoming", nil, bs(sb(5, 9, acked, 1)), -1, bs(sb(5, 9, acked, 1))},
		{"only stored", bs(sb(5, 9, acked, 1)), nil, -1, bs(sb(5, 9, acked, 1))},

		// Pruning exactly at the boundaries.
		{
			"start equal to a batch's last offset keeps that one offset",
			bs(sb(100, 109, acked, 1)), nil, 109,
			bs(sb(109, 109, acked, 1)),
		},
		{
			"start one past a batch's last offset drops it",
			bs(sb(100, 109, acked, 1), sb(110, 110, avail, 2)), nil, 110,
			bs(sb(110, 110, avail, 2)),
		},
		{
			"start equal to a batch's first offset leaves it whole",
			bs(sb(100, 109, acked, 1)), nil, 100,
			bs(sb(100, 109, acked, 1)),
		},
		{"start zero prunes nothing", bs(sb(0, 9, acked, 1)), nil, 0, bs(sb(0, 9, acked, 1))},
		{
			"both inputs are pruned alike",
			bs(sb(90, 99, acked, 1), sb(100, 104, avail, 1)), bs(sb(95, 102, archd, 1), sb(80, 89, archd, 5)), 98,
			bs(sb(98, 102, archd, 1), sb(103, 104, avail, 1)),
		},
		{
			"a high-priority incoming batch below start does not survive",
			bs(sb(100, 109, avail, 1)), bs(sb(90, 99, archd, 9)), 100,
			bs(sb(100, 109, avail, 1)),
		},
		{
			"clipped straddling batches still combine by priority",
			bs(sb(0, 20, avail, 1)), bs(sb(5, 15, acked, 1)), 10,
			bs(sb(10, 15, acked, 1), sb(16, 20, avail, 1)),
		},

		// Overlaps within one input, and ties.
		{
			"incoming batches overlapping each other",
			nil, bs(sb(0, 10, avail, 1), sb(5, 15, avail, 2), sb(8, 9, archd, 2)), -1,
			bs(sb(0, 4, avail, 1), sb(5, 7, avail, 2), sb(8, 9, archd, 2), sb(10, 15, avail, 2)),
		},
		{
			"stored batches overlapping each other",
			bs(sb(0, 10, acked, 1), sb(3, 4, avail, 1)), nil, -1,
			bs(sb(0, 10, acked, 1)),
		},
		{
			"unsorted inputs",
			bs(sb(20, 29, avail, 1), sb(0, 9, avail, 1)), bs(sb(25, 25, acked, 1), sb(5, 5, acked, 1)), -1,
			bs(
				sb(0, 4, avail, 1), sb(5, 5, acked, 1), sb(6, 9, avail, 1),
				sb(20, 24, avail, 1), sb(25, 25, acked, 1), sb(26, 29, avail, 1),
			),
		},
		{
			"equal priority from both sides merges into one batch",
			bs(sb(0, 9, acked, 1)), bs(sb(5, 14, acked, 1)), -1,
			bs(sb(0, 14, acked, 1)),
		},
		{"identical batches on both sides", bs(sb(0, 9, archg, 3)), bs(sb(0, 9, archg, 3)), -1, bs(sb(0, 9, archg, 3))},
		{
			"touching equal batches from different inputs coalesce",
			bs(sb(0, 9, acked, 1)), bs(sb(10, 19, acked, 1)), -1,
			bs(sb(0, 19, acked, 1)),
		},
		{
			"touching batches that differ only in count stay apart",
			bs(sb(0, 9, acked, 1)), bs(sb(10, 19, acked, 2)), -1,
			bs(sb(0, 9, acked, 1), sb(10, 19, acked, 2)),
		},
		{
			"a count tie is decided by state: ARCHIVING beats ACKNOWLEDGED",
			bs(sb(0, 9, acked, 2)), bs(sb(3, 6, archg, 2)), -1,
			bs(sb(0, 2, acked, 2), sb(3, 6, archg, 2), sb(7, 9, acked, 2)),
		},
		{
			"a count tie is decided by state: ARCHIVED beats ARCHIVING",
			bs(sb(3, 6, archd, 2)), bs(sb(0, 9, archg, 2)), -1,
			bs(sb(0, 2, archg, 2), sb(3, 6, archd, 2), sb(7, 9, archg, 2)),
		},
		{
			"a higher count beats a higher state: AVAILABLE over ARCHIVED",
			bs(sb(0, 9, archd, 1)), bs(sb(0, 9, avail, 2)), -1,
			bs(sb(0, 9, avail, 2)),
		},
		{
			"a small winner inside a big loser splits it in three",
			bs(sb(0, 99, avail, 1)), bs(sb(50, 50, acked, 1)), -1,
			bs(sb(0, 49, avail, 1), sb(50, 50, acked, 1), sb(51, 99, avail, 1)),
		},
		{
			"a winner that starts inside the loser and outlives it",
			bs(sb(0, 9, avail, 1)), bs(sb(5, 20, avail, 4)), -1,
			bs(sb(0, 4, avail, 1), sb(5, 20, avail, 4)),
		},
		{
			"batches that differ but yield the same state coalesce across the seam",
			bs(sb(0, 9, acked, 1), sb(10, 19, avail, 1)), bs(sb(10, 14, acked, 1)), -1,
			bs(sb(0, 14, acked, 1), sb(15, 19, avail, 1)),
		},
		{
			"a batch with last below first covers nothing",
			bs(sb(10, 5, archd, 9), sb(0, 3, avail, 1)), bs(sb(3, 2, archd, 9)), -1,
			bs(sb(0, 3, avail, 1)),
		},

		// Huge ranges and the top of the offset space: no per-offset work, no overflow.
		{
			"huge range split by a tiny one",
			bs(sb(0, 1<<62, avail, 1)), bs(sb(1<<40, 1<<40, acked, 1)), -1,
			bs(sb(0, 1<<40-1, avail, 1), sb(1<<40, 1<<40, acked, 1), sb(1<<40+1, 1<<62, avail, 1)),
		},
		{
			"two huge overlapping ranges",
			bs(sb(0, 1<<62, avail, 1)), bs(sb(1<<61, maxOff, avail, 2)), 1 << 60,
			bs(sb(1<<60, 1<<61-1, avail, 1), sb(1<<61, maxOff, avail, 2)),
		},
		{
			"a batch ending at MaxInt64 under a winner ending there too",
			bs(sb(maxOff-10, maxOff, avail, 1)), bs(sb(maxOff-2, maxOff, acked, 1)), -1,
			bs(sb(maxOff-10, maxOff-3, avail, 1), sb(maxOff-2, maxOff, acked, 1)),
		},
		{
			"a single offset at MaxInt64",
			bs(sb(maxOff, maxOff, avail, 1)), bs(sb(maxOff, maxOff, archd, 1)), maxOff,
			bs(sb(maxOff, maxOff, archd, 1)),
		},
		{
			"the whole offset space",
			bs(sb(0, maxOff, avail, 0)), bs(sb(0, 0, acked, 1), sb(maxOff, maxOff, acked, 1)), -1,
			bs(sb(0, 0, acked, 1), sb(1, maxOff-1, avail, 0), sb(maxOff, maxOff, acked, 1)),
		},
		{
			"maximum delivery count",
			bs(sb(0, 9, archd, math.MaxInt16-1)), bs(sb(0, 9, avail, math.MaxInt16)), -1,
			bs(sb(0, 9, avail, math.MaxInt16)),
		},
		{
			"offsets near 10^12",
			bs(sb(1e12, 1e12+99, avail, 1)), bs(sb(1e12+50, 1e12+149, acked, 1)), 1e12 + 10,
			bs(sb(1e12+10, 1e12+49, avail, 1), sb(1e12+50, 1e12+149, acked, 1)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			storedBefore, incomingBefore := slices.Clone(tt.stored), slices.Clone(tt.incoming)
			got := CombineBatches(tt.stored, tt.incoming, tt.start)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("CombineBatches(%v, %v, %d)\n got %v\nwant %v", tt.stored, tt.incoming, tt.start, got, tt.want)
			}
			if (got == nil) != (len(tt.want) == 0) {
				t.Errorf("an empty result must be nil and a non-empty one not: got %#v", got)
			}
			if !slices.Equal(tt.stored, storedBefore) || !slices.Equal(tt.incoming, incomingBefore) {
				t.Errorf("inputs modified: stored %v (was %v), incoming %v (was %v)",
					tt.stored, storedBefore, tt.incoming, incomingBefore)
			}
			if err := checkCombined(got); err != nil {
				t.Error(err)
			}
			// Spec §7 step 2: which side a batch came from does not matter.
			if swapped := CombineBatches(tt.incoming, tt.stored, tt.start); !slices.Equal(swapped, got) {
				t.Errorf("swapping the inputs changed the result: %v, want %v", swapped, got)
			}
		})
	}
}

// TestCombineBatchesDoesNotAliasInputs checks that the result never shares memory with an input,
// so that a caller who later edits the result cannot corrupt the stored list it passed in.
func TestCombineBatchesDoesNotAliasInputs(t *testing.T) {
	stored := []StateBatch{sb(0, 9, acked, 1), sb(20, 29, acked, 1)}
	for _, tc := range []struct {
		name             string
		stored, incoming []StateBatch
	}{
		{"stored only", stored, nil},
		{"incoming only", nil, stored},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CombineBatches(tc.stored, tc.incoming, -1)
			got[0].DeliveryCount = 99
			if stored[0].DeliveryCount != 1 {
				t.Fatalf("editing the result changed the input: %v", stored)
			}
		})
	}
}

// checkCombined reports a result that breaks semantics §7 step 4 or holds an invalid batch: every batch
// valid, sorted, non-overlapping, and minimal (no two touching neighbours with the same state and
// count).
func checkCombined(out []StateBatch) error {
	for i, b := range out {
		if err := b.Validate(); err != nil {
			return fmt.Errorf("result[%d]: %w", i, err)
		}
		if i == 0 {
			continue
		}
		prev := out[i-1]
		if b.FirstOffset <= prev.LastOffset {
			return fmt.Errorf("result[%d] %v overlaps or precedes result[%d] %v", i, b, i-1, prev)
		}
		if prev.LastOffset+1 == b.FirstOffset && prev.DeliveryState == b.DeliveryState &&
			prev.DeliveryCount == b.DeliveryCount {
			return fmt.Errorf("result[%d] %v should have been coalesced with result[%d] %v", i, b, i-1, prev)
		}
	}
	return nil
}

// referenceCombine is the per-offset model of semantics §7: it expands every batch into single offsets
// in a map, keeps the highest priority per offset, and reads runs back off in order. It only works
// on small offsets; tests shift its input and output to probe large ones.
func referenceCombine(stored, incoming []StateBatch, start int64) []StateBatch {
	type cell struct {
		state DeliveryState
		count int16
	}
	cells := map[int64]cell{}
	var hi int64 = -1
	for _, b := range slices.Concat(stored, incoming) {
		for o := b.FirstOffset; o <= b.LastOffset; o++ {
			if start != -1 && o < start {
				continue
			}
			c, seen := cells[o]
			if !seen || b.DeliveryCount > c.count || (b.DeliveryCount == c.count && b.DeliveryState > c.state) {
				cells[o] = cell{b.DeliveryState, b.DeliveryCount}
			}
			hi = max(hi, o)
		}
	}
	var out []StateBatch
	for o := int64(0); o <= hi; o++ {
		c, ok := cells[o]
		if !ok {
			continue
		}
		if n := len(out); n > 0 && out[n-1].LastOffset == o-1 &&
			out[n-1].DeliveryState == c.state && out[n-1].DeliveryCount == c.count {
			out[n-1].LastOffset = o
			continue
		}
		out = append(out, sb(o, o, c.state, c.count))
	}
	return out
}

// modelSpan bounds the relative offsets that model tests use, so that shifting them up to
// MaxInt64-modelSpan+1 reaches the very top of the offset space.
const modelSpan = 64

// modelBases are the shifts applied to model inputs: the bottom of the offset space, the offsets a
// real partition reaches, and the top, where a careless "last + 1" wraps around.
var modelBases = []int64{0, 1e12, math.MaxInt64 - (modelSpan - 1)}

func shiftBatches(batches []StateBatch, by int64) []StateBatch {
	out := make([]StateBatch, len(batches))
	for i, b := range batches {
		b.FirstOffset += by
		b.LastOffset += by
		out[i] = b
	}
	return out
}

func shiftStart(start, by int64) int64 {
	if start == -1 {
		return -1
	}
	return start + by
}

// checkAgainstModel combines batches given in small relative offsets (all within [0, modelSpan))
// at base offset, and compares with the reference model and the invariants.
func checkAgainstModel(stored, incoming []StateBatch, start, base int64) error {
	absStored, absIncoming := shiftBatches(stored, base), shiftBatches(incoming, base)
	storedBefore, incomingBefore := slices.Clone(absStored), slices.Clone(absIncoming)
	got := CombineBatches(absStored, absIncoming, shiftStart(start, base))
	want := shiftBatches(referenceCombine(stored, incoming, start), base)
	if !slices.Equal(got, want) {
		return fmt.Errorf("base %d: CombineBatches(%v, %v, %d)\n got %v\nwant %v",
			base, stored, incoming, start, shiftBatches(got, -base), shiftBatches(want, -base))
	}
	if err := checkCombined(got); err != nil {
		return fmt.Errorf("base %d: CombineBatches(%v, %v, %d): %w", base, stored, incoming, start, err)
	}
	if !slices.Equal(absStored, storedBefore) || !slices.Equal(absIncoming, incomingBefore) {
		return fmt.Errorf("base %d: CombineBatches(%v, %v, %d) modified its inputs", base, stored, incoming, start)
	}
	return nil
}

var modelStates = [...]DeliveryState{avail, acked, archg, archd}

// randomBatches draws up to maxLen batches with relative offsets in [0, modelSpan). Counts are
// drawn from a small range so that ties, which the state must break, are common.
func randomBatches(r *rand.Rand, maxLen int) []StateBatch {
	out := make([]StateBatch, r.IntN(maxLen+1))
	for i := range out {
		first := r.Int64N(modelSpan)
		last := first + r.Int64N(min(modelSpan-first, 1+r.Int64N(16)))
		out[i] = sb(first, last, modelStates[r.IntN(len(modelStates))], int16(r.IntN(4)))
	}
	return out
}

// randomStoredShape draws a list shaped like a stored one: sorted and non-overlapping, sometimes
// with gaps, sometimes not coalesced. This takes the linear path that real Writes take.
func randomStoredShape(r *rand.Rand) []StateBatch {
	var out []StateBatch
	for pos := r.Int64N(8); pos < modelSpan; {
		last := min(pos+r.Int64N(8), modelSpan-1)
		out = append(out, sb(pos, last, modelStates[r.IntN(len(modelStates))], int16(r.IntN(3))))
		pos = last + 1 + r.Int64N(3)*r.Int64N(2)
	}
	return out
}

func randomStart(r *rand.Rand) int64 {
	if r.IntN(3) == 0 {
		return -1
	}
	return r.Int64N(modelSpan)
}

func TestCombineBatchesAgainstModel(t *testing.T) {
	const (
		seed  = 20260601
		cases = 6000
	)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range cases {
		var stored, incoming []StateBatch
		switch i % 4 {
		case 0: // anything goes: unsorted, overlapping, within and across the inputs
			stored, incoming = randomBatches(r, 8), randomBatches(r, 8)
		case 3: // dense overlaps: many batches cover each offset, so the heap grows deep
			stored, incoming = randomBatches(r, 40), randomBatches(r, 40)
		case 1: // the shape of a real Write
			stored, incoming = randomStoredShape(r), randomBatches(r, 3)
		case 2: // two stored-shaped lists: the merge with no sorting at all
			stored, incoming = randomStoredShape(r), randomStoredShape(r)
		}
		start := randomStart(r)
		base := modelBases[r.IntN(len(modelBases))]
		if err := checkAgainstModel(stored, incoming, start, base); err != nil {
			t.Fatalf("seed %d, case %d: %v", seed, i, err)
		}
	}
}

// TestBatchHeap checks the heap on its own: whatever the push order, pops come out by
// non-increasing priority and none is lost. The sweep only ever pops an expired top, so a heap
// that misorders its lower levels could go unnoticed there for a long time.
func TestBatchHeap(t *testing.T) {
	const seed = 20260603
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 500 {
		batches := randomBatches(r, 50)
		var h batchHeap
		for _, b := range batches {
			h = h.push(b)
		}
		var popped []StateBatch
		for len(h) > 0 {
			popped = append(popped, h[0])
			h = h.pop()
		}
		if len(popped) != len(batches) {
			t.Fatalf("seed %d, case %d: pushed %d batches, popped %d", seed, i, len(batches), len(popped))
		}
		for j := 1; j < len(popped); j++ {
			if outranks(popped[j], popped[j-1]) {
				t.Fatalf("seed %d, case %d: pop %d (%v) outranks pop %d (%v)", seed, i, j, popped[j], j-1, popped[j-1])
			}
		}
	}
}

// TestCombineBatchesProperties checks laws that follow from semantics §7 and that the model test does
// not state directly: combining is symmetric, combining a result with nothing returns it, and
// combining in two steps equals combining at once (so a Write split in two stores the same state).
func TestCombineBatchesProperties(t *testing.T) {
	const (
		seed  = 20260602
		cases = 3000
	)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range cases {
		a, b, c := randomBatches(r, 6), randomBatches(r, 6), randomBatches(r, 6)
		start := randomStart(r)
		ab := CombineBatches(a, b, start)
		if ba := CombineBatches(b, a, start); !slices.Equal(ab, ba) {
			t.Fatalf("seed %d, case %d: not symmetric: a=%v b=%v start=%d: %v vs %v", seed, i, a, b, start, ab, ba)
		}
		if again := CombineBatches(ab, nil, start); !slices.Equal(again, ab) {
			t.Fatalf("seed %d, case %d: not idempotent: %v became %v", seed, i, ab, again)
		}
		stepwise := CombineBatches(ab, c, start)
		atOnce := CombineBatches(a, slices.Concat(b, c), start)
		if !slices.Equal(stepwise, atOnce) {
			t.Fatalf("seed %d, case %d: a=%v b=%v c=%v start=%d: stepwise %v, at once %v",
				seed, i, a, b, c, start, stepwise, atOnce)
		}
	}
}

// FuzzCombineBatches decodes the fuzzer's bytes into two small batch lists, a start offset and a
// base offset, and checks the combiner against the reference model and the invariants.
//
// Layout: byte 0 picks the base offset, byte 1 the start offset (-1 when above modelSpan),
// byte 2 how many of the batches that follow are stored (the rest are incoming), then 4 bytes per
// batch: first offset, length, state and count, each reduced into the model's small ranges.
func FuzzCombineBatches(f *testing.F) {
	f.Add([]byte{0, 255, 1, 111 % modelSpan, 9, 0, 1, 111%modelSpan + 1, 2, 1, 1})
	f.Add([]byte{1, 5, 2, 0, 9, 1, 1, 10, 9, 0, 1, 0, 4, 3, 1})
	f.Add([]byte{2, 63, 1, 50, 13, 0, 1, 60, 3, 2, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		base := modelBases[int(data[0])%len(modelBases)]
		start := int64(-1)
		if data[1] < modelSpan {
			start = int64(data[1])
		}
		var all []StateBatch
		for rest := data[3:]; len(rest) >= 4 && len(all) < 16; rest = rest[4:] {
			first := int64(rest[0]) % modelSpan
			last := min(first+int64(rest[1])%16, modelSpan-1)
			all = append(all, sb(first, last, modelStates[rest[2]%4], int16(rest[3]%4)))
		}
		split := min(int(data[2]), len(all))
		if err := checkAgainstModel(all[:split], all[split:], start, base); err != nil {
			t.Fatal(err)
		}
	})
}

// storedFixture is 2000 single-offset batches near 10^12, alternating between AVAILABLE and
// ACKNOWLEDGED so that none coalesce: the in-flight window at its default maximum, fully
// fragmented, which is the largest stored list a Write meets in practice.
func storedFixture() []StateBatch {
	const base = 1_000_000_000_000
	out := make([]StateBatch, 2000)
	for i := range out {
		out[i] = sb(base+int64(i), base+int64(i), modelStates[i%2], 1)
	}
	return out
}

// BenchmarkCombine2000x1 is the common Write: a fully fragmented stored list and one new batch.
func BenchmarkCombine2000x1(b *testing.B) {
	stored := storedFixture()
	incoming := []StateBatch{sb(stored[1000].FirstOffset, stored[1009].LastOffset, acked, 2)}
	start := stored[10].FirstOffset
	b.ReportAllocs()
	for b.Loop() {
		CombineBatches(stored, incoming, start)
	}
}

// BenchmarkCombine2000x100 is a large acknowledgement: 100 sorted new batches spread over the
// stored list, each of 5 offsets.
func BenchmarkCombine2000x100(b *testing.B) {
	stored := storedFixture()
	incoming := make([]StateBatch, 100)
	for i := range incoming {
		first := stored[i*20].FirstOffset
		incoming[i] = sb(first, first+4, archd, int16(1+i%2))
	}
	start := stored[10].FirstOffset
	b.ReportAllocs()
	for b.Loop() {
		CombineBatches(stored, incoming, start)
	}
}

// BenchmarkCombineUnsortedOverlapping is the general path: 2000 batches in random order that
// overlap each other, which needs the sort and a heap that holds many batches.
func BenchmarkCombineUnsortedOverlapping(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	incoming := make([]StateBatch, 2000)
	for i := range incoming {
		first := 1_000_000_000_000 + r.Int64N(10_000)
		incoming[i] = sb(first, first+r.Int64N(100), modelStates[r.IntN(4)], int16(r.IntN(5)))
	}
	b.ReportAllocs()
	for b.Loop() {
		CombineBatches(nil, incoming, -1)
	}
}
