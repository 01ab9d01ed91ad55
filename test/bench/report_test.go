package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func ok(name string, writesPerSecond, requestsPerWrite float64) Result {
	return Result{Scenario: name, Writers: 1, Writes: 100, Seconds: 1, WritesPerSecond: writesPerSecond, RequestsPerWrite: requestsPerWrite}
}

func TestEvaluate(t *testing.T) {
	results := []Result{
		ok("raw-update", 200, 1),
		ok("naive", 100, 2),
		ok("persister-1x1", 190, 1.01),
		ok("persister-64x1", 900, 0.1),
		{Scenario: "persister-4x200", Error: "setup: panic: not implemented yet"},
	}
	want := map[string]struct {
		verdict string
		value   float64 // -1: none
	}{
		"persister-1x1 writes/s >= 0.9x raw-update":            {"PASS", 0.95},
		"persister-1x1 API requests/write <= 1.05":             {"PASS", 1.01},
		"persister-64x1 writes/s >= 5x raw-update":             {"MISS", 4.5},
		"persister-4x200 writes/s >= 0.8x raw-update-parallel": {"ERROR", -1},
		"naive writes/s vs raw-update (reference)":             {"INFO", 0.5},
		"naive API requests/write (reference)":                 {"INFO", 2},
		// The proxy scenarios did not run (proxy_test.go checks their targets).
		"kafka-proxy-16 writes/s vs kafka-direct-16 (reference)": {"SKIP", -1},
		"kafka-proxy-1 writes/s vs kafka-direct-1 (reference)":   {"SKIP", -1},
		"wire-proxy-64x1 writes/s >= 0.9x wire-direct-64x1":      {"SKIP", -1},
		"kafka-proxy-16 p99 - kafka-direct-16 p99 <= 1 ms":       {"SKIP", -1},
		"kafka-proxy-1 p99 - kafka-direct-1 p99 <= 1 ms":         {"SKIP", -1},
	}
	checks := evaluate(results)
	if len(checks) != len(want) {
		t.Fatalf("%d checks, want %d", len(checks), len(want))
	}
	for _, c := range checks {
		w, found := want[c.Target]
		if !found {
			t.Errorf("unexpected target %q", c.Target)
			continue
		}
		if c.Verdict != w.verdict {
			t.Errorf("%s: verdict %s, want %s", c.Target, c.Verdict, w.verdict)
		}
		switch {
		case w.value < 0 && c.Value != nil:
			t.Errorf("%s: value %v, want none", c.Target, *c.Value)
		case w.value >= 0 && (c.Value == nil || abs(*c.Value-w.value) > 1e-9):
			t.Errorf("%s: value %v, want %v", c.Target, c.Value, w.value)
		}
	}

	// Without raw-update-parallel the 4x200 target is skipped, not failed, even when 4x200 ran.
	results[4] = ok("persister-4x200", 300, 0.2)
	for _, c := range evaluate(results) {
		if strings.HasPrefix(c.Target, "persister-4x200") && c.Verdict != "SKIP" {
			t.Errorf("%s: verdict %s without its baseline, want SKIP", c.Target, c.Verdict)
		}
	}
	// A requests bound fails above it.
	results[2] = ok("persister-1x1", 190, 1.2)
	for _, c := range evaluate(results) {
		if c.Target == "persister-1x1 API requests/write <= 1.05" && c.Verdict != "MISS" {
			t.Errorf("%s: verdict %s at 1.2 requests/write, want MISS", c.Target, c.Verdict)
		}
	}
}

func abs(x float64) float64 { return max(x, -x) }

func TestResultLine(t *testing.T) {
	tests := []struct {
		name string
		r    Result
		want string
	}{
		{
			"measured",
			Result{Scenario: "raw-update", Writes: 900, WritesPerSecond: 180.04, P50Millis: 4.291, P99Millis: 29.85, RequestsPerWrite: 1},
			"scenario=raw-update writes_per_s=180.0 p50_ms=4.29 p99_ms=29.85 api_requests_per_write=1.000",
		},
		{
			"not measured",
			Result{Scenario: "persister-1x1", Error: "setup: panic: not implemented yet"},
			`scenario=persister-1x1 error="setup: panic: not implemented yet"`,
		},
		{
			"some writes failed",
			Result{Scenario: "naive", Writes: 10, FailedWrites: 2, WritesPerSecond: 2, P50Millis: 1, P99Millis: 2, RequestsPerWrite: 2, Error: "conflict"},
			`scenario=naive writes_per_s=2.0 p50_ms=1.00 p99_ms=2.00 api_requests_per_write=2.000 failed_writes=2 error="conflict"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.Line(); got != tt.want {
				t.Errorf("Line() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestNewResult(t *testing.T) {
	l := load{elapsed: 2 * time.Second, latencies: []time.Duration{time.Millisecond, 2 * time.Millisecond, 3 * time.Millisecond, 40 * time.Millisecond}}
	r := newResult("raw-update", 1, l, 6, []ProcessCPU{{Process: "kube-apiserver", Cores: 0.5}})
	if r.Writes != 4 || r.WritesPerSecond != 2 || r.RequestsPerWrite != 1.5 || r.P50Millis != 2 || r.P99Millis != 40 || !r.OK() {
		t.Errorf("newResult = %+v", r)
	}
	if len(r.CPU) != 1 || r.CPU[0].MillisPerWrite != 250 {
		t.Errorf("CPU = %+v, want 0.5 cores over 2s for 4 writes: 250 ms per write", r.CPU)
	}
	if r := newResult("naive", 1, load{elapsed: time.Second}, 0, nil); r.OK() || r.Error == "" {
		t.Errorf("a run without writes is %+v, want an error", r)
	}
}

// TestReportIsJSON checks that a report with missing values still encodes (NaN would not).
func TestReportIsJSON(t *testing.T) {
	results := []Result{ok("raw-update", 200, 1), {Scenario: "persister-1x1", Error: "boom"}}
	var out bytes.Buffer
	if err := writeReport(&out, Report{Results: results, Checks: evaluate(results)}, true); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Results) != 2 || back.Checks[0].Verdict != "ERROR" {
		t.Errorf("decoded %+v", back)
	}
}

func TestTables(t *testing.T) {
	results := []Result{ok("raw-update", 200, 1), {Scenario: "persister-1x1", Error: "a\nb|c"}}
	results[0].CPU = []ProcessCPU{{"bench", 0.1, 0.5}, {"etcd", 0.2, 1}, {"others", 0.7, 3.5}}
	var out bytes.Buffer
	writeTables(&out, results, evaluate(results))
	for _, want := range []string{
		"| raw-update | 1 | 200.0 | 0.00 | 0.00 | 1.000 |",
		"| persister-1x1 | 0 | error: a b/c | | | |",
		"| CPU ms per write (cores busy) | bench | etcd | total | others (cores) |",
		"| raw-update | 0.50 (0.10) | 1.00 (0.20) | 1.50 (0.30) | 0.70 |",
		"| persister-1x1 writes/s >= 0.9x raw-update | – | ERROR |",
	} {
		if !strings.Contains(out.String(), want+"\n") {
			t.Errorf("tables lack the row\n%s\nin\n%s", want, out.String())
		}
	}
}

func TestConfigSelected(t *testing.T) {
	got, err := Config{Duration: time.Second, Scenarios: []string{"raw-update-parallel", "raw-update"}}.selected()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "raw-update-parallel" || got[1].name != "raw-update" {
		t.Errorf("selected %v, want raw-update-parallel then raw-update, as named", got)
	}
	if all, _ := (Config{Duration: time.Second}).selected(); len(all) != len(ScenarioNames()) {
		t.Errorf("no names selects %d scenarios, want all %d", len(all), len(ScenarioNames()))
	}
	for _, bad := range []Config{
		{Duration: time.Second, Scenarios: []string{"raw"}},
		{Duration: time.Second, Scenarios: []string{"naive", "naive"}},
		{Duration: 0},
		{Duration: time.Second, Warmup: -time.Second},
		{Duration: time.Second, ScaleAPIServerEnv: []string{"GOGC"}},
	} {
		if _, err := bad.selected(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestTrialMergesRounds(t *testing.T) {
	tr := &trial{scenario: scenario{name: "raw-update"}, writers: make([]writeFunc, 2)}
	probe := cpuProbe{procs: []process{{name: "bench"}, {name: "etcd"}}}
	// CPU samples: bench, etcd, the whole machine.
	tr.add(load{elapsed: time.Second, latencies: []time.Duration{3 * time.Millisecond, 5 * time.Millisecond}},
		sample{requests: 10, cpu: []float64{1, 2, 10}}, sample{requests: 12, cpu: []float64{1.5, 2.1, 11}})
	tr.add(load{elapsed: time.Second, latencies: []time.Duration{time.Millisecond, 4 * time.Millisecond}, failed: 1, firstErr: errors.New("boom")},
		sample{requests: 100, cpu: []float64{5, 5, 20}}, sample{requests: 103, cpu: []float64{5.5, 5.3, 21.6}})
	r := tr.result(probe)
	if r.Writes != 4 || r.Seconds != 2 || r.WritesPerSecond != 2 || r.APIRequests != 5 || r.FailedWrites != 1 || r.Error != "boom" || r.P50Millis != 3 {
		t.Errorf("merged result %+v", r)
	}
	want := []ProcessCPU{{"bench", 0.5, 250}, {"etcd", 0.2, 100}, {"others", 0.6, 300}}
	if len(r.CPU) != len(want) {
		t.Fatalf("merged CPU %+v, want %+v", r.CPU, want)
	}
	for i, w := range want {
		if c := r.CPU[i]; c.Process != w.Process || abs(c.Cores-w.Cores) > 1e-9 || abs(c.MillisPerWrite-w.MillisPerWrite) > 1e-9 {
			t.Errorf("merged CPU %+v, want %+v", r.CPU, want)
		}
	}

	// A process that could not be read in one window leaves the CPU figures out.
	tr.add(load{elapsed: time.Second}, sample{cpu: []float64{1, 1, 1}}, sample{cpu: []float64{2, math.NaN(), 3}})
	if r := tr.result(probe); r.CPU != nil {
		t.Errorf("CPU %+v after a lost sample, want none", r.CPU)
	}
	// A failed setup is the whole result.
	failed := &trial{scenario: scenario{name: "naive"}, err: errors.New("setup: boom")}
	if r := failed.result(probe); r.OK() || r.Error != "setup: boom" || r.Line() != `scenario=naive error="setup: boom"` {
		t.Errorf("failed setup gives %+v", r)
	}
}
