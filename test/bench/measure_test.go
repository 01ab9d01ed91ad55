package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"none", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of four is the second", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"median of five is the third", ms(1, 2, 3, 4, 5), 0.5, 3 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p50 of 100 is the 50th", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"p99 of 10 is the largest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.q); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.q, got, tt.want)
			}
		})
	}
}

// TestMeasureCountsTheWindow runs writers of known speed: the writes of the warm-up are left out, every
// write of the window is in, marks come in order, and no write starts after the window.
func TestMeasureCountsTheWindow(t *testing.T) {
	const writeTime = 2 * time.Millisecond
	var started, inFlightAfterClose atomic.Int64
	var closed atomic.Bool
	write := func(context.Context) error {
		if closed.Load() {
			inFlightAfterClose.Add(1)
		}
		started.Add(1)
		time.Sleep(writeTime)
		return nil
	}
	var marks []bool
	var startedAtOpen int64
	l, err := measure(t.Context(), []writeFunc{write, write}, window{warmup: 50 * time.Millisecond, duration: 200 * time.Millisecond},
		func(end bool) {
			marks = append(marks, end)
			if !end {
				startedAtOpen = started.Load()
				return
			}
			closed.Store(true)
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(marks) != 2 || marks[0] || !marks[1] {
		t.Errorf("marks = %v, want [false true]", marks)
	}
	if l.elapsed < 200*time.Millisecond || l.elapsed > time.Second {
		t.Errorf("elapsed = %v, want about 200ms", l.elapsed)
	}
	// Two writers, each at most one write per writeTime, only in the window.
	if n := len(l.latencies); n == 0 || n > int(2*l.elapsed/writeTime)+2 {
		t.Errorf("%d writes in a %v window of two writers taking %v each", n, l.elapsed, writeTime)
	}
	if startedAtOpen == 0 || int64(len(l.latencies)) > started.Load()-startedAtOpen+2 {
		t.Errorf("%d writes counted, but only %d started after the window opened", len(l.latencies), started.Load()-startedAtOpen)
	}
	if l.latencies[0] < writeTime {
		t.Errorf("fastest write took %v, less than the %v it sleeps", l.latencies[0], writeTime)
	}
	if n := inFlightAfterClose.Load(); n > 2 {
		t.Errorf("%d writes started after the window closed; at most the two in flight may", n)
	}
}

func TestMeasureCountsFailures(t *testing.T) {
	boom := errors.New("boom")
	var n atomic.Int64
	write := func(context.Context) error {
		if n.Add(1)%2 == 0 {
			return boom
		}
		time.Sleep(time.Millisecond)
		return nil
	}
	l, err := measure(t.Context(), []writeFunc{write}, window{duration: 100 * time.Millisecond}, func(bool) {})
	if err != nil {
		t.Fatal(err)
	}
	if l.failed == 0 || len(l.latencies) == 0 || !errors.Is(l.firstErr, boom) {
		t.Errorf("failed=%d ok=%d firstErr=%v, want both counted and %v", l.failed, len(l.latencies), l.firstErr, boom)
	}
}

func TestMeasureStopsOnPanic(t *testing.T) {
	calm := func(context.Context) error { time.Sleep(time.Millisecond); return nil }
	panicky := func(context.Context) error { panic("not implemented yet") }
	start := time.Now()
	_, err := measure(t.Context(), []writeFunc{calm, panicky}, window{warmup: time.Second, duration: 10 * time.Second}, func(bool) {})
	var p *panicError
	if !errors.As(err, &p) || p.value != "not implemented yet" || len(p.stack) == 0 {
		t.Fatalf("err = %v, want the panic with its stack", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("measure ran %v after a writer panicked; it should stop at once", d)
	}
}

func TestMeasureEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	write := func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	if _, err := measure(ctx, []writeFunc{write}, window{duration: 10 * time.Second}, func(bool) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want %v", err, context.DeadlineExceeded)
	}
}
