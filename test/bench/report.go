package bench

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Result is one scenario's measurement.
type Result struct {
	Scenario string `json:"scenario"`
	// Writers is the number of concurrent writers.
	Writers int `json:"writers"`
	// Writes counts the successful writes that completed in the measured window.
	Writes int `json:"writes"`
	// FailedWrites counts the writes of the window that returned an error.
	FailedWrites int `json:"failedWrites,omitempty"`
	// Seconds is the measured window's length.
	Seconds          float64 `json:"seconds"`
	WritesPerSecond  float64 `json:"writesPerSecond"`
	P50Millis        float64 `json:"p50Millis"`
	P99Millis        float64 `json:"p99Millis"`
	APIRequests      int64   `json:"apiRequests"`
	RequestsPerWrite float64 `json:"apiRequestsPerWrite"`
	// CPU is the CPU time each process used in the window; empty where it could not be read.
	CPU []ProcessCPU `json:"cpu,omitempty"`
	// Error says why the scenario has no valid measurement: its setup failed, a write panicked, or
	// (with FailedWrites) the first error a write returned.
	Error string `json:"error,omitempty"`
}

// ProcessCPU is the CPU time one process used during a scenario's measured window.
type ProcessCPU struct {
	Process string `json:"process"`
	// Cores is the CPU time divided by the window's length: 1 is one core busy all the time.
	Cores float64 `json:"cores"`
	// MillisPerWrite is the CPU time divided by the writes.
	MillisPerWrite float64 `json:"millisPerWrite"`
}

// OK reports whether the scenario measured what it set out to: it ran, and no write failed.
func (r Result) OK() bool { return r.Error == "" && r.FailedWrites == 0 && r.Writes > 0 }

// Line is the scenario's one-line summary: key=value pairs, as `make bench` prints them.
func (r Result) Line() string {
	if r.Writes == 0 && r.Error != "" {
		return fmt.Sprintf("scenario=%s error=%q", r.Scenario, r.Error)
	}
	line := fmt.Sprintf("scenario=%s writes_per_s=%.1f p50_ms=%.2f p99_ms=%.2f api_requests_per_write=%.3f",
		r.Scenario, r.WritesPerSecond, r.P50Millis, r.P99Millis, r.RequestsPerWrite)
	if r.FailedWrites > 0 || r.Error != "" {
		line += fmt.Sprintf(" failed_writes=%d error=%q", r.FailedWrites, r.Error)
	}
	return line
}

// newResult computes a scenario's figures from what its writers did.
func newResult(name string, writers int, l load, requests int64, cpu []ProcessCPU) Result {
	window := l.elapsed
	r := Result{
		Scenario: name, Writers: writers, Writes: len(l.latencies), FailedWrites: l.failed,
		Seconds: window.Seconds(), APIRequests: requests,
		P50Millis: millis(percentile(l.latencies, 0.50)), P99Millis: millis(percentile(l.latencies, 0.99)),
	}
	if l.firstErr != nil && l.failed > 0 {
		r.Error = l.firstErr.Error()
	}
	if r.Writes == 0 {
		if r.Error == "" {
			r.Error = "no write completed in the measured window"
		}
		return r
	}
	r.WritesPerSecond = float64(r.Writes) / window.Seconds()
	r.RequestsPerWrite = float64(requests) / float64(r.Writes)
	for _, c := range cpu {
		r.CPU = append(r.CPU, ProcessCPU{Process: c.Process, Cores: c.Cores, MillisPerWrite: c.Cores * window.Seconds() * 1000 / float64(r.Writes)})
	}
	return r
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Check is one throughput target evaluated on the run's results.
type Check struct {
	Target string `json:"target"`
	// Value is the measured ratio of writes per second, or the API requests per write; nil when a
	// scenario the target needs did not run or failed.
	Value *float64 `json:"value,omitempty"`
	// Verdict is PASS or MISS for a target; INFO for a figure reported for comparison only; SKIP when a
	// scenario it needs did not run, ERROR when one failed.
	Verdict string `json:"verdict"`
}

// target is one of the project's throughput targets: a scenario's writes per second as a multiple
// of a baseline scenario's in the same run, or (with no baseline) its API requests per write. A
// bound of 0 marks a figure reported for comparison, without a target.
type target struct {
	scenario string
	baseline string
	bound    float64
}

// targets are the project's: the persister must cost one request per write and keep up with raw
// status updates alone, and batch concurrent writes of one partition into far fewer updates.
var targets = []target{
	{scenario: "persister-1x1", baseline: "raw-update", bound: 0.9},
	{scenario: "persister-1x1", bound: 1.05},
	{scenario: "persister-64x1", baseline: "raw-update", bound: 5},
	{scenario: "persister-4x200", baseline: "raw-update-parallel", bound: 0.8},
	{scenario: "naive", baseline: "raw-update"},
	{scenario: "naive"},
}

func (t target) String() string {
	switch {
	case t.baseline == "" && t.bound == 0:
		return t.scenario + " API requests/write (reference)"
	case t.baseline == "":
		return fmt.Sprintf("%s API requests/write <= %g", t.scenario, t.bound)
	case t.bound == 0:
		return fmt.Sprintf("%s writes/s vs %s (reference)", t.scenario, t.baseline)
	default:
		return fmt.Sprintf("%s writes/s >= %gx %s", t.scenario, t.bound, t.baseline)
	}
}

func (t target) evaluate(byName map[string]Result) Check {
	c := Check{Target: t.String()}
	for _, name := range []string{t.scenario, t.baseline} {
		if name == "" {
			continue
		}
		r, ran := byName[name]
		switch {
		case !ran:
			c.Verdict = "SKIP"
			return c
		case !r.OK():
			c.Verdict = "ERROR"
			return c
		}
	}
	r := byName[t.scenario]
	value := r.RequestsPerWrite
	if t.baseline != "" {
		value = r.WritesPerSecond / byName[t.baseline].WritesPerSecond
	}
	c.Value = &value
	switch {
	case t.bound == 0:
		c.Verdict = "INFO"
	case t.baseline == "" && value <= t.bound, t.baseline != "" && value >= t.bound:
		c.Verdict = "PASS"
	default:
		c.Verdict = "MISS"
	}
	return c
}

// evaluate checks every target against the results.
func evaluate(results []Result) []Check {
	byName := make(map[string]Result, len(results))
	for _, r := range results {
		byName[r.Scenario] = r
	}
	checks := make([]Check, len(targets))
	for i, t := range targets {
		checks[i] = t.evaluate(byName)
	}
	return append(checks, addedP99Checks(byName)...)
}

// writeTables prints the results, the CPU they cost and the targets as markdown tables.
func writeTables(w io.Writer, results []Result, checks []Check) {
	var b strings.Builder
	b.WriteString("\n| scenario | writers | writes/s | p50 ms | p99 ms | API requests/write |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		if !r.OK() {
			fmt.Fprintf(&b, "| %s | %d | error: %s | | | |\n", r.Scenario, r.Writers, oneLine(r.Error))
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f | %.2f | %.2f | %.3f |\n",
			r.Scenario, r.Writers, r.WritesPerSecond, r.P50Millis, r.P99Millis, r.RequestsPerWrite)
	}
	writeCPUTable(&b, results)
	b.WriteString("\n| target (ratios within this run) | measured | result |\n| --- | ---: | --- |\n")
	for _, c := range checks {
		value := "–"
		if c.Value != nil {
			value = fmt.Sprintf("%.2f", *c.Value)
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.Target, value, c.Verdict)
	}
	_, _ = io.WriteString(w, b.String())
}

// writeCPUTable prints the CPU time per write of each process, where it was measured, and how busy
// the machine's other processes kept it: the noise the run suffered.
func writeCPUTable(b *strings.Builder, results []Result) {
	var procs []string
	for _, r := range results {
		if r.OK() && len(r.CPU) > 0 {
			procs = procs[:0]
			for _, c := range r.CPU[:len(r.CPU)-1] { // the last is the others
				procs = append(procs, c.Process)
			}
			break
		}
	}
	if len(procs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n| CPU ms per write (cores busy) | %s | total | others (cores) |\n| --- |%s ---: | ---: |\n",
		strings.Join(procs, " | "), strings.Repeat(" ---: |", len(procs)))
	for _, r := range results {
		if !r.OK() || len(r.CPU) != len(procs)+1 {
			continue
		}
		fmt.Fprintf(b, "| %s |", r.Scenario)
		var ms, cores float64
		for _, c := range r.CPU[:len(procs)] {
			fmt.Fprintf(b, " %.2f (%.2f) |", c.MillisPerWrite, c.Cores)
			ms += c.MillisPerWrite
			cores += c.Cores
		}
		fmt.Fprintf(b, " %.2f (%.2f) | %.2f |\n", ms, cores, r.CPU[len(procs)].Cores)
	}
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}
