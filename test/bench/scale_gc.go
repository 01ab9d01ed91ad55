package bench

import (
	"context"
	"fmt"
	"math"
	"strings"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// kube-apiserver holds every partition decoded in its watch cache, once for the object and once for
// each recent event of it, so its Go heap grows with the partitions and the write rate; its garbage
// collector's work grows with that heap. Part of that work is done by the requests themselves (mark
// assists), which then answer late: the bench says, per window, how much there was.

// gcSample is a Go process's garbage collection so far, from the runtime metrics it exports.
type gcSample struct {
	cpu, assist, cycles float64 // CPU seconds of the collector, of them in mark assists; cycles
	liveMB              float64 // heap marked live by the last cycle
}

// sampleAPIServerGC reads kube-apiserver's garbage collection so far; false when its metrics
// cannot be read.
func sampleAPIServerGC(ctx context.Context, config *rest.Config) (gcSample, bool) {
	samples, err := apiserverMetrics(ctx, config)
	if err != nil {
		return gcSample{}, false
	}
	return gcFromSamples(samples)
}

// apiserverMetrics reads kube-apiserver's metrics.
func apiserverMetrics(ctx context.Context, config *rest.Config) (metricSamples, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	body, err := dc.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	return parseSamples(string(body)), nil
}

// gcFromSamples picks a process's garbage collection out of its metrics (client_golang's runtime
// metrics collector, which kube-apiserver registers).
func gcFromSamples(samples metricSamples) (gcSample, bool) {
	g := gcSample{
		cpu:    samples.sum("go_cpu_classes_gc_total_cpu_seconds_total", ""),
		assist: samples.sum("go_cpu_classes_gc_mark_assist_cpu_seconds_total", ""),
		cycles: samples.sum("go_gc_cycles_total_gc_cycles_total", ""),
		liveMB: samples.sum("go_gc_heap_live_bytes", "") / (1 << 20),
	}
	ok := !math.IsNaN(g.cpu) && !math.IsNaN(g.assist) && !math.IsNaN(g.cycles) && !math.IsNaN(g.liveMB)
	return g, ok
}

// describeGC says what the collector did between before and after, against processCPU, the CPU
// seconds the whole process used meanwhile.
func describeGC(before, after gcSample, processCPU float64) string {
	cpu := after.cpu - before.cpu
	return fmt.Sprintf("%.0f garbage collections, %.2f s of CPU (%.0f%% of its own; %.2f s of it in the requests' mark assists), %.0f MB live after the last",
		after.cycles-before.cycles, cpu, 100*cpu/processCPU, after.assist-before.assist, after.liveMB)
}

// The fence's PATCHes took the operator 1.2 to 2.7 times as long as the raw updates' PUTs took the
// bench, 16 at a time each (runs 47 to 50). kube-apiserver's own measure of each request's time
// says how much of that was the API server's.

// requestTime is the time kube-apiserver spent on requests of one verb so far, and their count.
type requestTime struct{ seconds, count float64 }

// statusRequestVerbs are the verbs of the status requests that fence partitions (PATCH: the
// operator) and that the load and the raw baseline send (PUT).
var statusRequestVerbs = []string{"PATCH", "PUT"}

// statusRequestTimes reads kube-apiserver's time for the status requests of partitions by verb; nil
// when its metrics cannot be read.
func statusRequestTimes(ctx context.Context, config *rest.Config) map[string]requestTime {
	samples, err := apiserverMetrics(ctx, config)
	if err != nil {
		return nil
	}
	return statusRequestTimesFrom(samples)
}

func statusRequestTimesFrom(samples metricSamples) map[string]requestTime {
	out := map[string]requestTime{}
	for _, verb := range statusRequestVerbs {
		labels := []string{`resource="sharepartitionstates"`, `subresource="status"`, `verb="` + verb + `"`}
		out[verb] = requestTime{seconds: samples.sumWith("apiserver_request_duration_seconds_sum", labels...),
			count: samples.sumWith("apiserver_request_duration_seconds_count", labels...)}
	}
	return out
}

// describeRequestTimes says how many status requests of each verb kube-apiserver answered between
// before and after, and their average time.
func describeRequestTimes(before, after map[string]requestTime) string {
	if before == nil || after == nil {
		return "(its metrics could not be read)"
	}
	var parts []string
	for _, verb := range statusRequestVerbs {
		was := before[verb]
		if math.IsNaN(was.count) { // none of the verb yet when before was read
			was = requestTime{}
		}
		n := after[verb].count - was.count
		if math.IsNaN(n) || n <= 0 {
			parts = append(parts, fmt.Sprintf("no %s", verb))
			continue
		}
		parts = append(parts, fmt.Sprintf("%.0f %s, %.1f ms each on average", n, verb, 1000*(after[verb].seconds-was.seconds)/n))
	}
	return strings.Join(parts, ", ")
}
