package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestScaleLayoutSpreadsPartitions(t *testing.T) {
	for _, tt := range []struct {
		n, groups, victims int
	}{
		{50, 10, 10},
		{1000, 20, 250},
		{10000, 200, 1000},
		{10001, 201, 1000},
	} {
		l := newScaleLayout(tt.n)
		total, perNamespace := 0, map[string]int{}
		for _, g := range l.groups {
			total += g.partitions
			perNamespace[g.namespace] += g.partitions
			if g.victim && g.namespace != l.namespaces[0] {
				t.Errorf("n=%d: victim group %s in %s, want all in %s", tt.n, g.id, g.namespace, l.namespaces[0])
			}
		}
		if total != tt.n || len(l.groups) != tt.groups || l.victims != tt.victims || len(l.victimNames()) != tt.victims {
			t.Errorf("n=%d: %d partitions in %d groups, %d victims (%d names); want %d groups, %d victims",
				tt.n, total, len(l.groups), l.victims, len(l.victimNames()), tt.groups, tt.victims)
		}
		if len(perNamespace) != scaleNamespaces {
			t.Errorf("n=%d: partitions in %d namespaces, want %d", tt.n, len(perNamespace), scaleNamespaces)
		}
		if got := len(l.loadTargets(nil)); got != tt.n-tt.victims {
			t.Errorf("n=%d: %d load targets, want %d", tt.n, got, tt.n-tt.victims)
		}
	}
}

// Any stretch of the load's round robin goes to the namespaces' sidecars in equal parts, within a
// group: a sidecar that got more would hold the load to its client-side limit while the other idles.
func TestLoadSpreadsEvenlyOverTheSidecars(t *testing.T) {
	for _, n := range []int{50, 1000, 5000, 10000} {
		l := newScaleLayout(n)
		targets := l.loadTargets(nil)
		size := l.groups[0].partitions
		stretch := 2 * scaleNamespaces * size
		for start := 0; start+stretch <= len(targets); start += size {
			count := map[string]int{}
			for _, tg := range targets[start : start+stretch] {
				count[tg.namespace]++
			}
			for _, ns := range l.namespaces {
				if c := count[ns]; c < stretch/scaleNamespaces-size || c > stretch/scaleNamespaces+size {
					t.Fatalf("n=%d: targets %d to %d: %d of %d in %s, want %d within a group (%d)",
						n, start, start+stretch, c, stretch, ns, stretch/scaleNamespaces, size)
				}
			}
		}
	}
}

// Every partition starts from the state the other scenarios settle at, and the load goes on from it.
func TestSteadyStateIsWhereTheLoadGoesOn(t *testing.T) {
	state := steadyState()
	if int64(len(state.batches)) != 3*steadyStateRuns || state.startOffset != baseOffset || state.batches[0].FirstOffset != baseOffset {
		t.Fatalf("%d batches from offset %d, start offset %d; want %d from %d", len(state.batches), state.batches[0].FirstOffset,
			state.startOffset, 3*steadyStateRuns, baseOffset)
	}
	newest := state.batches[len(state.batches)-1].LastOffset
	next := newScaleLayout(50).loadTargets(nil)[0].cursor.next()
	if next.batches[0].FirstOffset != newest+1 {
		t.Fatalf("the load's first write starts at offset %d, want %d", next.batches[0].FirstOffset, newest+1)
	}
}

func TestParseScaleSizes(t *testing.T) {
	if got, err := ParseScaleSizes("1000, 5000,10000"); err != nil || len(got) != 3 || got[2] != 10000 {
		t.Fatalf("%v, %v", got, err)
	}
	for _, bad := range []string{"", "1000,", "ten", "4"} {
		if _, err := ParseScaleSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// An open loop counts latency from the scheduled arrival: writes held up behind a slow one (one
// slot) carry the wait in their latency, and the arrivals keep coming.
func TestMedianLeavesOutAWindowCaughtInAStall(t *testing.T) {
	for _, c := range []struct {
		rates []float64
		want  float64
	}{
		{[]float64{225.7, 128.7, 223.8}, 223.8}, // run 45: one window in a stall
		{[]float64{240, 230}, 235},
		{[]float64{7}, 7},
	} {
		if got := median(slices.Clone(c.rates)); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.rates, got, c.want)
		}
	}
}

func TestOpenLoopCountsLatencyFromArrival(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	write := func(context.Context) error {
		if calls.Add(1) == 1 {
			<-release // the first write is slow
		}
		if calls.Load() == 3 {
			return errors.New("refused")
		}
		return nil
	}
	l := &openLoop{rate: 100, maxInFlight: 1, write: write, begin: time.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(t.Context())
	const hold = 200 * time.Millisecond
	time.Sleep(hold)
	close(release)
	for calls.Load() < 5 {
		time.Sleep(time.Millisecond)
	}
	l.stopAndWait()
	res := l.window(0, l.now()+time.Second)
	if len(res.latencies) < 3 || res.failed != 1 || res.unfinished != 0 {
		t.Fatalf("%d latencies, %d failed, %d unfinished", len(res.latencies), res.failed, res.unfinished)
	}
	// The second arrival was due at 10 ms and could only be sent once the first finished, after hold.
	for i, w := range l.arrived[:2] {
		if latency := w.finished - w.scheduled; latency < hold-10*time.Millisecond {
			t.Errorf("write %d: latency %s, want at least %s", i, latency, hold-10*time.Millisecond)
		}
	}
	if res.offeredPerSecond <= 0 || res.achievedPerSecond <= 0 {
		t.Errorf("offered %.1f/s, achieved %.1f/s", res.offeredPerSecond, res.achievedPerSecond)
	}
}

func TestMetricSamplesSum(t *testing.T) {
	samples := metricSamples{
		`go_memstats_heap_alloc_bytes 2.097152e+06`,
		`go_memstats_heap_alloc_bytes_total 99`,
		`rest_client_requests_total{code="200",host="127.0.0.1:6443",method="PATCH"} 1000`,
		`rest_client_requests_total{code="409",host="127.0.0.1:6443",method="PATCH"} 3`,
		`rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 16`,
		`rest_client_requests_total_other{method="PATCH"} 7`,
	}
	for _, tt := range []struct {
		name, label string
		want        float64
	}{
		{"go_memstats_heap_alloc_bytes", "", 2097152},
		{"rest_client_requests_total", `method="PATCH"`, 1003},
		{"rest_client_requests_total", `method="GET"`, 16},
		{"rest_client_requests_total", "", 1019},
	} {
		if got := samples.sum(tt.name, tt.label); got != tt.want {
			t.Errorf("sum(%s, %s) = %v, want %v", tt.name, tt.label, got, tt.want)
		}
	}
	if got := samples.sum("rest_client_requests_total", `method="POST"`); !math.IsNaN(got) {
		t.Errorf("no POST samples: sum %v, want NaN", got)
	}
}

func TestSlowSpellsGatherTheWritesOfOneStall(t *testing.T) {
	ms := time.Millisecond
	l := &openLoop{}
	for i := range 100 { // a write every 10 ms from 0 to 990 ms, 5 ms each...
		l.arrived = append(l.arrived, openWrite{scheduled: time.Duration(i) * 10 * ms, finished: time.Duration(i)*10*ms + 5*ms, complete: true})
	}
	for i := 20; i < 25; i++ { // ...but for one stall of 80 ms at 200 ms
		l.arrived[i].finished = 280 * ms
	}
	l.arrived[80].finished = l.arrived[80].scheduled + 50*ms // and one slow write, far from it
	l.arrived[81].failed = true                              // a failure is not a slow write
	l.arrived[81].finished = l.arrived[81].scheduled + time.Second
	spells := l.slowSpells(100*ms, 900*ms, 30*ms)
	want := []slowSpell{{from: 100 * ms, to: 140 * ms, writes: 5, worst: 80 * ms}, {from: 700 * ms, to: 700 * ms, writes: 1, worst: 50 * ms}}
	if len(spells) != len(want) {
		t.Fatalf("spells %+v, want %+v", spells, want)
	}
	for i := range want {
		if spells[i] != want[i] {
			t.Fatalf("spell %d is %+v, want %+v", i, spells[i], want[i])
		}
	}
	if got := describeSlowSpells(spells); got != "6 in 2 spells: 0.10-0.14 s (5, worst 80 ms), 0.70-0.70 s (1, worst 50 ms)" {
		t.Errorf("described as %q", got)
	}
	if got := describeSlowSpells(nil); got != "none" {
		t.Errorf("no spells described as %q", got)
	}
}

func TestGCFromSamples(t *testing.T) {
	body := "# HELP go_gc_heap_live_bytes Heap memory occupied by live objects.\n" +
		"go_cpu_classes_gc_total_cpu_seconds_total 69.1\n" +
		"go_cpu_classes_gc_mark_assist_cpu_seconds_total 23.5\n" +
		"go_gc_cycles_total_gc_cycles_total 126\n" +
		"go_gc_heap_live_bytes 6.291456e+08\n"
	before, ok := gcFromSamples(parseSamples(body))
	if !ok || before.cycles != 126 || before.liveMB != 600 {
		t.Fatalf("gcFromSamples = %+v, %v", before, ok)
	}
	after := gcSample{cpu: 71.6, assist: 24.5, cycles: 128, liveMB: 612}
	want := "2 garbage collections, 2.50 s of CPU (25% of its own; 1.00 s of it in the requests' mark assists), 612 MB live after the last"
	if got := describeGC(before, after, 10); got != want {
		t.Errorf("describeGC:\n got %s\nwant %s", got, want)
	}
	if _, ok := gcFromSamples(parseSamples("go_gc_cycles_total_gc_cycles_total 1\n")); ok {
		t.Error("an exposition without the runtime's CPU classes was read as complete")
	}
}

// A run with kube-apiserver's environment changed says so on every line it prints, so that its
// figures are not taken for the issue's.
func TestScaleLinesNameADiagnosticRun(t *testing.T) {
	level := func(load float64) scaleLevel {
		return scaleLevel{load: load, operatorMillisPerWrite: 0.2, apiserverMillisPerWrite: 4,
			run: openResult{offeredPerSecond: 100, achievedPerSecond: 100, latencies: []time.Duration{3 * time.Millisecond, 5 * time.Millisecond}}}
	}
	r := &scaleResult{partitions: 100, fenced: 10, lonePercentile50: 3 * time.Millisecond, capacityPerSecond: 200,
		levels: []scaleLevel{level(0.5), level(0.8)}, fence: time.Second, raw: time.Second, sidecarCacheBoundMB: 128}
	if line := r.line(r.levels[0]); strings.Contains(line, "apiserver_env") {
		t.Errorf("an ordinary run's line names an environment: %s", line)
	}
	if v := r.verdicts(); !strings.HasPrefix(v, "scale-100: ") {
		t.Errorf("an ordinary run's targets: %s", v)
	}
	r.apiserverEnv = []string{"GOGC=off", "GOMEMLIMIT=8GiB"}
	for _, l := range r.levels {
		if line := r.line(l); !strings.HasSuffix(line, " apiserver_env=GOGC=off,GOMEMLIMIT=8GiB") {
			t.Errorf("a diagnostic run's line does not end with its environment: %s", line)
		}
	}
	if v := r.verdicts(); !strings.HasPrefix(v, "scale-100 (diagnostic, kube-apiserver with GOGC=off GOMEMLIMIT=8GiB; not the issue's targets): ") {
		t.Errorf("a diagnostic run's targets do not say so: %s", v)
	}
}

func TestStatusRequestTimes(t *testing.T) {
	exposition := func(patches, patchSeconds, puts, putSeconds float64) metricSamples {
		l := `{component="apiserver",dry_run="",group="sharestate.dev",resource="sharepartitionstates",scope="resource",subresource="status",verb="%s",version="v1alpha1"}`
		return parseSamples(fmt.Sprintf("apiserver_request_duration_seconds_sum"+l+" %g\n", "PATCH", patchSeconds) +
			fmt.Sprintf("apiserver_request_duration_seconds_count"+l+" %g\n", "PATCH", patches) +
			fmt.Sprintf("apiserver_request_duration_seconds_sum"+l+" %g\n", "PUT", putSeconds) +
			fmt.Sprintf("apiserver_request_duration_seconds_count"+l+" %g\n", "PUT", puts) +
			// another resource's, and the partitions' own (not status) requests: not counted
			`apiserver_request_duration_seconds_sum{resource="sharegroups",subresource="status",verb="PATCH"} 100` + "\n" +
			`apiserver_request_duration_seconds_count{resource="sharepartitionstates",subresource="",verb="PUT"} 100` + "\n")
	}
	before := statusRequestTimesFrom(exposition(10, 1, 100, 2))
	after := statusRequestTimesFrom(exposition(1010, 51, 2100, 42))
	if got, want := describeRequestTimes(before, after), "1000 PATCH, 50.0 ms each on average, 2000 PUT, 20.0 ms each on average"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := describeRequestTimes(before, before); got != "no PATCH, no PUT" {
		t.Errorf("no requests between: %q", got)
	}
	if got := describeRequestTimes(statusRequestTimesFrom(parseSamples("")), after); !strings.HasPrefix(got, "1010 PATCH, 50.5 ms") {
		t.Errorf("none before: %q", got)
	}
	if got := describeRequestTimes(nil, after); got != "(its metrics could not be read)" {
		t.Errorf("unread metrics: %q", got)
	}
}

func TestParseSchedstatWait(t *testing.T) {
	got, err := parseSchedstatWait("447775 2649758 1\n")
	if err != nil || got != 2649758*time.Nanosecond {
		t.Errorf("parseSchedstatWait = %v, %v; want 2.649758ms", got, err)
	}
	for _, bad := range []string{"", "1 2", "1 x 3", "1 2 3 4"} {
		if _, err := parseSchedstatWait(bad); err == nil {
			t.Errorf("parseSchedstatWait(%q) succeeded", bad)
		}
	}
}

// TestRunQueueWaitOfThisProcess reads this test's own threads while more of them are runnable than
// there are cores, so that some wait on a run queue.
func TestRunQueueWaitOfThisProcess(t *testing.T) {
	busy := 2 * runtime.NumCPU()
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(busy)) // a thread for each busy goroutine
	var done atomic.Bool
	for range busy {
		go func() {
			for !done.Load() { // spin: a thread that is always runnable
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	waited, err := readRunQueueWait(os.Getpid())
	done.Store(true)
	if err != nil {
		t.Fatal(err)
	}
	if waited <= 0 {
		t.Errorf("run-queue wait %v with more busy threads than cores: want more than none", waited)
	}
	if _, err := readRunQueueWait(-1); err == nil {
		t.Error("readRunQueueWait(-1) succeeded")
	}
}

// The operator's partition watch bytes are read from its counter by resource; an operator without the
// counter gives NaN, printed as "-".
func TestPartitionWatchBytes(t *testing.T) {
	samples := parseSamples(`sharestate_operator_watch_bytes_total{resource="pods"} 1200
sharestate_operator_watch_bytes_total{resource="sharepartitionstates"} 0
`)
	if got := partitionWatchBytesFrom(samples); got != 0 {
		t.Errorf("partition watch bytes %v, want 0", got)
	}
	if got := partitionWatchBytesFrom(parseSamples("go_goroutines 10\n")); !math.IsNaN(got) {
		t.Errorf("without the counter: %v, want NaN", got)
	}
	r := &scaleResult{partitions: 100, levels: []scaleLevel{{load: 0.5, partitionWatchBytesPerWrite: math.NaN(),
		run: openResult{latencies: []time.Duration{time.Millisecond}}}}}
	if line := r.line(r.levels[0]); !strings.Contains(line, " operator_partition_watch_bytes_per_write=- ") {
		t.Errorf("a level without the count: %s", line)
	}
}
