package bench

import (
	"strings"
	"testing"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// The outputs below are Kafka 4.4.0's tools', as the proxy family's runs printed them.

func TestParseProducerPerformancePrefersTheSteadyState(t *testing.T) {
	out := `4216 records sent, 841.7 records/sec (0.82 MB/sec), 1529.5 ms avg latency, 2649.0 ms max latency.
In steady state.
5000 records sent, 998.801438 records/sec (0.98 MB/sec), 3.91 ms avg latency, 60.00 ms max latency, 3 ms 50th, 6 ms 95th, 21 ms 99th, 55 ms 99.9th.
4000 steady state records sent, 999.000999 records/sec (0.98 MB/sec), 2.47 ms avg latency, 31.00 ms max latency, 2 ms 50th, 4 ms 95th, 9 ms 99th, 30 ms 99.9th.
`
	got, err := parseProducerPerformance(out)
	if err != nil {
		t.Fatal(err)
	}
	want := producePerf{recordsPerSec: 999.000999, avgMs: 2.47, p50Ms: 2, p99Ms: 9, steadyState: true, records: 4000}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestParseProducerPerformanceWithoutWarmup(t *testing.T) {
	out := `31 records sent, 6.1 records/sec (0.01 MB/sec), 1419.7 ms avg latency, 4854.0 ms max latency.
75001 records sent, 2083.708396 records/sec (2.03 MB/sec), 11264.72 ms avg latency, 15742.00 ms max latency, 11321 ms 50th, 14977 ms 95th, 15519 ms 99th, 15642 ms 99.9th.
`
	got, err := parseProducerPerformance(out)
	if err != nil {
		t.Fatal(err)
	}
	want := producePerf{recordsPerSec: 2083.708396, avgMs: 11264.72, p50Ms: 11321, p99Ms: 15519, records: 75001}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	// Progress lines alone are no summary.
	if _, err := parseProducerPerformance(strings.SplitAfter(out, "\n")[0]); err == nil {
		t.Error("a progress line was taken for the summary")
	}
}

func TestParseConsumerPerformance(t *testing.T) {
	out := `start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-12-03 18:21:35:181, 2026-12-03 18:21:36:739, 97.6611, 62.6837, 100005, 64188.0616, 905, 653, 149.5576, 153147.0138
`
	got, err := parseConsumerPerformance(out)
	if err != nil {
		t.Fatal(err)
	}
	if got["fetch.nMsg.sec"] != "153147.0138" || got["data.consumed.in.nMsg"] != "100005" || got["nMsg.sec"] != "64188.0616" {
		t.Errorf("got %v", got)
	}
	if _, err := parseConsumerPerformance("WARNING: Exiting before consuming the expected number of records\n"); err == nil {
		t.Error("an output without a summary parsed")
	}
}

func TestParseEndToEndLatency(t *testing.T) {
	out := `0	12.345
Avg latency: 4.1234 ms
Percentiles: 50th = 3, 99th = 11, 99.9th = 40
`
	got, err := parseEndToEndLatency(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := (e2eLatency{avgMs: 4.1234, p50Ms: 3, p99Ms: 11}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if _, err := parseEndToEndLatency("Avg latency: 4.1234 ms\n"); err == nil {
		t.Error("an output without percentiles parsed")
	}
}

func TestHAProxyConfigFrontsEveryBroker(t *testing.T) {
	l := kafkacluster.Listener{Name: haproxyListener,
		Bind:      map[int32]string{1: "127.0.0.1:2001", 0: "127.0.0.1:2000"},
		Advertise: map[int32]string{0: "127.0.0.1:3000", 1: "127.0.0.1:3001"}}
	cfg := haproxyConfig(l)
	for _, want := range []string{"mode tcp",
		"frontend kafka-0\n    bind 127.0.0.1:3000\n    default_backend kafka-0\n",
		"backend kafka-0\n    server kafka-0 127.0.0.1:2000\n",
		"frontend kafka-1\n    bind 127.0.0.1:3001\n    default_backend kafka-1\n",
		"backend kafka-1\n    server kafka-1 127.0.0.1:2001\n"} {
		if !strings.Contains(cfg, want) {
			t.Errorf("the configuration lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, " check") {
		t.Errorf("the configuration has health checks:\n%s", cfg)
	}
	if got := byNode(l.Advertise); strings.Join(got, ",") != "127.0.0.1:3000,127.0.0.1:3001" {
		t.Errorf("byNode = %v", got)
	}
}

func TestSummarizeTakesMediansAndSumsCPU(t *testing.T) {
	rounds := []proxyRound{
		{produce: producePerf{recordsPerSec: 10}, fetchRate: 300, cpu: proxyCPU{sidecars: 1}},
		{produce: producePerf{recordsPerSec: 30}, fetchRate: 100, cpu: proxyCPU{sidecars: 2}},
		{produce: producePerf{recordsPerSec: 20}, fetchRate: 200, cpu: proxyCPU{sidecars: 3}},
	}
	s := summarize(rounds)
	if s.produceRate != 20 || s.fetchRate != 200 || s.cpu.sidecars != 6 {
		t.Errorf("got produce %v, fetch %v, sidecar CPU %v; want 20, 200, 6", s.produceRate, s.fetchRate, s.cpu.sidecars)
	}
}

func TestRotateStartsEachRoundWithAnotherPath(t *testing.T) {
	paths := []proxyPath{{name: "direct"}, {name: "proxy"}, {name: "haproxy"}}
	var got []string
	for i := range 4 {
		for _, p := range rotate(paths, i) {
			got = append(got, p.name)
		}
	}
	want := "direct proxy haproxy proxy haproxy direct haproxy direct proxy direct proxy haproxy"
	if strings.Join(got, " ") != want {
		t.Errorf("got %v, want %s", got, want)
	}
	if paths[0].name != "direct" {
		t.Error("rotate changed its argument")
	}
}

func TestRatioOfMediansAndSpreadOfRounds(t *testing.T) {
	a := []proxyRound{{fetchRate: 90}, {fetchRate: 50}, {fetchRate: 120}}
	b := []proxyRound{{fetchRate: 100}, {fetchRate: 100}, {fetchRate: 100}}
	if got := ratio(a, b, fetchRate); got != 0.9 {
		t.Errorf("ratio = %v, want 0.9", got)
	}
	if got, want := spread(a, b, fetchRate), "rounds 0.50–1.20"; !strings.HasSuffix(got, want) {
		t.Errorf("spread = %q, want it to end %q", got, want)
	}
}

// TestChecksWithoutHAProxy: a machine without haproxy records its targets as not measured, saying
// how to install it, and still checks the proxy against the direct path.
func TestChecksWithoutHAProxy(t *testing.T) {
	var out strings.Builder
	b := &proxyBench{k: &kafkaRun{report: newKafkaReport(&out)}}
	round := proxyRound{produce: producePerf{recordsPerSec: 100}, fetchRate: 1000}
	b.checks(map[string][]proxyRound{"direct": {round}, "proxy": {round}})
	b.k.report.targets()
	for _, want := range []string{
		"| proxy: produce records/s through the proxies ÷ direct | 1× | ≥ 0.95× | PASS",
		"| proxy: fetch records/s through the proxies ÷ through HAProxy | n/a | ≥ 0.9× | SKIP " + haproxyInstall + " |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the targets lack %q:\n%s", want, out.String())
		}
	}
}
