package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"time"
)

// window is the timing of a run: every writer starts at once, writes during the first warmup are
// not measured (connections, caches and the API server's own warm-up), and the measured window lasts
// duration.
type window struct {
	warmup, duration time.Duration
}

// load is what the writers did in the measured window. A write belongs to the window when it
// completed in it.
type load struct {
	elapsed   time.Duration   // the window's length, as it happened
	latencies []time.Duration // of each successful write of the window, sorted
	failed    int             // writes of the window that returned an error
	firstErr  error           // the first error a write returned, in the window or not
}

// failureBackoff slows down a writer whose write failed, so that writers that fail at once (a
// rejected request) do not spin and starve the control plane that shares the machine.
const failureBackoff = time.Millisecond

// measure runs every writer back to back in a goroutine of its own for the warm-up and the window,
// and calls mark(false) when the window opens and mark(true) when it closes, to sample counters. The
// window's edges are the moments of those calls, so that what mark samples and the writes counted
// cover the same time even when a timer fires late on a busy machine. After the window closes no
// writer starts a write; measure waits for the writes in flight. A panic in a write stops the run and
// is returned, as is the cancellation of ctx.
func measure(ctx context.Context, writers []writeFunc, w window, mark func(end bool)) (load, error) {
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	begin := time.Now()
	stop := make(chan struct{})
	logs := make([]writerLog, len(writers))
	var wg sync.WaitGroup
	for i, write := range writers {
		wg.Go(func() { logs[i] = drive(ctx, abort, write, begin, stop) })
	}
	var opened, closed time.Duration
	if sleepUntil(ctx, begin.Add(w.warmup)) {
		opened = time.Since(begin)
		mark(false)
		if sleepUntil(ctx, begin.Add(opened+w.duration)) {
			closed = time.Since(begin)
			mark(true)
		}
	}
	close(stop)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return load{}, err
	}

	total := load{elapsed: closed - opened}
	for _, l := range logs {
		for _, r := range l.writes {
			switch {
			case r.done < opened || r.done >= closed:
			case r.failed:
				total.failed++
			default:
				total.latencies = append(total.latencies, r.latency)
			}
		}
		if total.firstErr == nil {
			total.firstErr = l.firstErr
		}
	}
	slices.Sort(total.latencies)
	return total, nil
}

// writerLog is what one writer did: every write, and the first error.
type writerLog struct {
	writes   []writeRecord
	firstErr error
}

// writeRecord is one write: when it completed (since the run began), how long it took, whether it failed.
type writeRecord struct {
	done, latency time.Duration
	failed        bool
}

// drive is one writer's loop: it writes back to back until stop is closed or ctx ends.
func drive(ctx context.Context, abort context.CancelCauseFunc, write writeFunc, begin time.Time, stop <-chan struct{}) writerLog {
	var l writerLog
	for {
		select {
		case <-stop:
			return l
		case <-ctx.Done():
			return l
		default:
		}
		began := time.Now()
		err := protect(ctx, write)
		done := time.Now()
		if p := (*panicError)(nil); errors.As(err, &p) {
			abort(err)
			return l
		}
		l.writes = append(l.writes, writeRecord{done: done.Sub(begin), latency: done.Sub(began), failed: err != nil})
		if err != nil {
			if l.firstErr == nil {
				l.firstErr = err
			}
			time.Sleep(failureBackoff)
		}
	}
}

// panicError is a panic of code under test, turned into an error so that one scenario's panic is
// reported without taking the control plane and the other scenarios down with it.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// protect calls f, turning a panic into a *panicError.
func protect(ctx context.Context, f func(context.Context) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return f(ctx)
}

// sleepUntil waits until t; it reports false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// percentile is the nearest-rank q-quantile (0 < q <= 1) of sorted latencies; 0 for none.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
