package bench

import "testing"

// TestProxyChecks: the proxy's throughput against kfake is a reference, its p99 a target, each within
// one run's results.
func TestProxyChecks(t *testing.T) {
	withP99 := func(name string, writesPerSecond, p99 float64) Result {
		r := ok(name, writesPerSecond, 0)
		r.P99Millis = p99
		return r
	}
	for _, tt := range []struct {
		name                   string
		results                []Result
		throughput, addedP99   string
		wantRatio, wantAddedMs float64
	}{
		{"within both", []Result{withP99("kafka-direct-16", 1000, 2), withP99("kafka-proxy-16", 950, 2.5)}, "INFO", "PASS", 0.95, 0.5},
		{"slower", []Result{withP99("kafka-direct-16", 1000, 2), withP99("kafka-proxy-16", 850, 2.5)}, "INFO", "PASS", 0.85, 0.5},
		{"p99 added", []Result{withP99("kafka-direct-16", 1000, 2), withP99("kafka-proxy-16", 1000, 3.5)}, "INFO", "MISS", 1, 1.5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checks := map[string]Check{}
			for _, c := range evaluate(tt.results) {
				checks[c.Target] = c
			}
			ratio := checks["kafka-proxy-16 writes/s vs kafka-direct-16 (reference)"]
			added := checks["kafka-proxy-16 p99 - kafka-direct-16 p99 <= 1 ms"]
			if ratio.Verdict != tt.throughput || ratio.Value == nil || abs(*ratio.Value-tt.wantRatio) > 1e-9 {
				t.Errorf("throughput: %s %v, want %s %v", ratio.Verdict, ratio.Value, tt.throughput, tt.wantRatio)
			}
			if added.Verdict != tt.addedP99 || added.Value == nil || abs(*added.Value-tt.wantAddedMs) > 1e-9 {
				t.Errorf("p99: %s %v, want %s %v", added.Verdict, added.Value, tt.addedP99, tt.wantAddedMs)
			}
		})
	}
	failed := []Result{withP99("kafka-direct-16", 1000, 2), {Scenario: "kafka-proxy-16", Error: "setup: no broker"}}
	for _, c := range evaluate(failed) {
		if c.Target == "kafka-proxy-16 p99 - kafka-direct-16 p99 <= 1 ms" && (c.Verdict != "ERROR" || c.Value != nil) {
			t.Errorf("p99 of a failed scenario: %s %v, want ERROR and no value", c.Verdict, c.Value)
		}
	}
}
