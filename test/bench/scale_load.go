package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// openLoop drives writes that arrive at a fixed rate, as a share group's acknowledgements do, whatever
// the system does with them: a write is sent at its scheduled arrival time (or as soon as a slot is
// free, when maxInFlight writes are outstanding), and its latency is counted from the arrival time,
// not from when it was sent. A system that cannot keep up then shows a backlog and growing latencies,
// where a closed loop would just slow down with it (coordinated omission).
type openLoop struct {
	rate        float64 // writes per second
	maxInFlight int
	write       writeFunc

	begin    time.Time
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}

	mu      sync.Mutex
	arrived []openWrite
}

// openWrite is one write of an open loop, its times since the loop began.
type openWrite struct {
	scheduled, finished time.Duration
	failed, complete    bool
}

// defaultMaxInFlight bounds the writes outstanding at once: beyond it arrivals wait for a slot (and
// count the wait in their latency) rather than pile up goroutines without bound.
const defaultMaxInFlight = 4096

// startOpenLoop starts the arrivals; stopOpenLoop ends them.
func startOpenLoop(ctx context.Context, rate float64, write writeFunc) *openLoop {
	l := &openLoop{rate: rate, maxInFlight: defaultMaxInFlight, write: write, begin: time.Now(),
		stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(ctx)
	return l
}

func (l *openLoop) run(ctx context.Context) {
	defer close(l.done)
	slots := make(chan struct{}, l.maxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	interval := time.Duration(float64(time.Second) / l.rate)
	for i := 0; ; i++ {
		scheduled := time.Duration(i) * interval
		if !l.waitUntil(ctx, l.begin.Add(scheduled)) {
			return
		}
		select {
		case slots <- struct{}{}:
		case <-l.stop:
			return
		case <-ctx.Done():
			return
		}
		index := l.record(openWrite{scheduled: scheduled})
		wg.Go(func() {
			defer func() { <-slots }()
			err := protect(ctx, l.write)
			l.finish(index, err != nil)
		})
	}
}

// waitUntil sleeps until t, unless the loop is stopped or ctx ends first.
func (l *openLoop) waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		select {
		case <-l.stop:
			return false
		default:
			return ctx.Err() == nil
		}
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-l.stop:
		return false
	case <-ctx.Done():
		return false
	}
}

func (l *openLoop) record(w openWrite) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.arrived = append(l.arrived, w)
	return len(l.arrived) - 1
}

func (l *openLoop) finish(i int, failed bool) {
	now := time.Since(l.begin)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.arrived[i].finished, l.arrived[i].failed, l.arrived[i].complete = now, failed, true
}

// now is the time since the loop began: the unit of a window's edges.
func (l *openLoop) now() time.Duration { return time.Since(l.begin) }

// stopAndWait ends the arrivals and waits for the writes outstanding. Calling it again waits again.
func (l *openLoop) stopAndWait() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.done
}

// openResult is what an open loop did in a window [from, to).
type openResult struct {
	seconds float64
	// offered counts the arrivals scheduled in the window, achieved the writes that succeeded in it,
	// per second.
	offeredPerSecond, achievedPerSecond float64
	// latencies, sorted, of the window's arrivals that succeeded, from their scheduled arrival.
	latencies []time.Duration
	failed    int
	// unfinished counts the window's arrivals not answered when the result was taken.
	unfinished int
}

// window returns what the loop did between from and to (times since it began). Call it once the
// writes of the window have had their answers (after stopAndWait, or later than to).
func (l *openLoop) window(from, to time.Duration) openResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := openResult{seconds: (to - from).Seconds()}
	var offered, achieved int
	for _, w := range l.arrived {
		if w.complete && !w.failed && w.finished >= from && w.finished < to {
			achieved++
		}
		if w.scheduled < from || w.scheduled >= to {
			continue
		}
		offered++
		switch {
		case !w.complete:
			r.unfinished++
		case w.failed:
			r.failed++
		default:
			r.latencies = append(r.latencies, w.finished-w.scheduled)
		}
	}
	slices.Sort(r.latencies)
	if r.seconds > 0 {
		r.offeredPerSecond, r.achievedPerSecond = float64(offered)/r.seconds, float64(achieved)/r.seconds
	}
	return r
}

// slowSpell is a run of a window's slow writes whose scheduled arrivals are less than
// slowSpellGap apart: most often one stall of something on the path, which every write that
// arrived during it waited out.
type slowSpell struct {
	from, to time.Duration // the first and the last slow write's scheduled arrival, since the window began
	writes   int
	worst    time.Duration
}

// slowSpellGap separates two spells of slow writes.
const slowSpellGap = 500 * time.Millisecond

// slowSpells returns the spells of the writes that arrived in [from, to) and succeeded in more than
// over, in the order they arrived. Like window, call it once the window's writes have their answers.
func (l *openLoop) slowSpells(from, to, over time.Duration) []slowSpell {
	l.mu.Lock()
	defer l.mu.Unlock()
	var spells []slowSpell
	for _, w := range l.arrived { // in the order of arrival
		latency := w.finished - w.scheduled
		if w.scheduled < from || w.scheduled >= to || !w.complete || w.failed || latency <= over {
			continue
		}
		at := w.scheduled - from
		if n := len(spells); n > 0 && at-spells[n-1].to < slowSpellGap {
			spells[n-1].to, spells[n-1].writes, spells[n-1].worst = at, spells[n-1].writes+1, max(spells[n-1].worst, latency)
			continue
		}
		spells = append(spells, slowSpell{from: at, to: at, writes: 1, worst: latency})
	}
	return spells
}

// describeSlowSpells says, in a few words, when the slow writes came and how slow they were.
func describeSlowSpells(spells []slowSpell) string {
	if len(spells) == 0 {
		return "none"
	}
	total := 0
	parts := make([]string, 0, min(len(spells), maxSpellsDescribed))
	for i, s := range spells {
		total += s.writes
		if i < maxSpellsDescribed {
			parts = append(parts, fmt.Sprintf("%.2f-%.2f s (%d, worst %.0f ms)", s.from.Seconds(), s.to.Seconds(), s.writes, millis(s.worst)))
		}
	}
	more := ""
	if len(spells) > maxSpellsDescribed {
		more = fmt.Sprintf(" and %d spells more", len(spells)-maxSpellsDescribed)
	}
	return fmt.Sprintf("%d in %d spells: %s%s", total, len(spells), strings.Join(parts, ", "), more)
}

// maxSpellsDescribed bounds the spells describeSlowSpells lists.
const maxSpellsDescribed = 5
