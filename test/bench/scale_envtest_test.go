package bench

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestScaleScenarioEndToEnd runs the scale scenario at a tiny size: its own control plane, the built
// operator and sidecars, the open loop at both levels and the fence, and checks the lines it prints.
func TestScaleScenarioEndToEnd(t *testing.T) {
	testenv.Require(t, env) // the scenario starts its own control plane; -short skips it as well
	var out, log strings.Builder
	cfg := Config{Warmup: 500 * time.Millisecond, Duration: 2 * time.Second, ScaleSizes: []int{50}} // windows long enough that a stall of the loaded machine does not empty one
	if err := runScale(t.Context(), cfg, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	var lines []map[string]string
	verdicts := 0
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		switch {
		case strings.HasPrefix(line, "scenario=scale-50 "):
			lines = append(lines, keyValues(line))
		case strings.HasPrefix(line, "scale-50: "):
			verdicts++
		}
	}
	if len(lines) != 2 || verdicts != 1 {
		t.Fatalf("want two scenario lines and one line of targets:\n%s", out.String())
	}
	for i, want := range []string{"0.5", "0.8"} {
		l := lines[i]
		if l["load"] != want || l["failed_writes"] != "" || l["fenced"] != "10" {
			t.Errorf("line %d: %v; want load %s, no failed writes, 10 partitions fenced", i, l, want)
		}
		for _, key := range []string{"offered_per_s", "achieved_per_s", "p50_ms", "operator_rss_mb", "sidecar_rss_mb", "apiserver_cpu_ms_per_write", "capacity_per_s", "lone_p50_ms"} {
			if v, err := strconv.ParseFloat(l[key], 64); err != nil || v <= 0 {
				t.Errorf("line %d: %s=%q, want a positive number", i, key, l[key])
			}
		}
	}
	checkScaleProgressLog(t, log.String())
	for _, key := range []string{"fence_1000_s", "raw_1000_s"} {
		if v, err := strconv.ParseFloat(lines[0][key], 64); err != nil || v <= 0 {
			t.Errorf("%s=%q, want a positive number", key, lines[0][key])
		}
	}
}

// checkScaleProgressLog checks the progress log of the scale scenario at 50 partitions: its capacity
// windows, kube-apiserver's time for the fence, who used the cores in each phase of the fence, and
// how the fence and its baseline were seen.
func checkScaleProgressLog(t *testing.T, log string) {
	t.Helper()
	if n := strings.Count(log, "bench: scale-50: capacity window "); n != scaleCapacityWindows {
		t.Errorf("the progress log tells %d capacity windows, want %d:\n%s", n, scaleCapacityWindows, log)
	}
	if !serverTimeOfTheFence.MatchString(log) {
		t.Errorf("the progress log does not tell kube-apiserver's time for the fence's PATCHes:\n%s", log)
	}
	for _, phase := range []string{"the fence", "the raw updates"} {
		if !phaseUse(phase).MatchString(log) {
			t.Errorf("the progress log does not tell who used and waited for the cores during %s:\n%s", phase, log)
		}
	}
	for _, seen := range []*regexp.Regexp{fencesSeen, rawUpdatesSeen} {
		if !seen.MatchString(log) {
			t.Errorf("the progress log does not match %s:\n%s", seen, log)
		}
	}
}

// fencesSeen and rawUpdatesSeen are the progress lines of the fence's and the baseline's timing: both
// by the bench's watch of the victims' namespace, which saw every one of the 10 partitions raised.
var (
	fencesSeen     = regexp.MustCompile(`partitions fenced after [0-9.]+ s \(the first\), .* [0-9.]+ s \(all\); the bench's watch of scale-0 decoded [1-9][0-9]* events`)
	rawUpdatesSeen = regexp.MustCompile(`10 raw updates answered after [0-9.]+ s, [0-9.]+ ms each on average; seen raised after [0-9.]+ s \(the first\), .* [0-9.]+ s \(all\); the bench's watch of scale-0 decoded [1-9][0-9]* events`)
)

// serverTimeOfTheFence is the progress line of kube-apiserver's time for the fence's requests: at least
// the 10 PATCHes that fence, and the load's PUTs.
var serverTimeOfTheFence = regexp.MustCompile(`\(apiserver_request_duration_seconds\): during the fence [1-9][0-9]+ PATCH, [0-9.]+ ms each on average, [0-9]+ PUT`)

// phaseUse is the progress line of a phase's CPU and run-queue waits, with a number for every process
// (the operator is stopped for the raw updates).
func phaseUse(phase string) *regexp.Regexp {
	n := `[0-9]+\.[0-9]+`
	return regexp.MustCompile(`during ` + phase + ` \(` + n + ` s\) the machine was ` + n + ` of [0-9]+ cores busy: .*; ` +
		`waited for a core: kube-apiserver ` + n + ` s \(` + n + ` threads\), the sidecars ` + n + ` s \(` + n + ` threads\), ` +
		`the operator (` + n + ` s \(` + n + ` threads\)|not running), the bench ` + n + ` s \(` + n + ` threads\)`)
}

func keyValues(line string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(line) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = v
		}
	}
	return out
}
