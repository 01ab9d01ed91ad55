package bench

import (
	"fmt"
	"math"
)

// The proxy family's targets (issue 31): through the proxies, at least 0.95× the direct path's
// produce and fetch throughput and at most 1 ms more produce p99, and at least 0.9× HAProxy's
// throughput, HAProxy being the floor for any second hop in user space.
const (
	proxyMinDirectRatio  = 0.95
	proxyMaxAddedP99Ms   = 1.0
	proxyMinHAProxyRatio = 0.9
)

// report prints a line per path and the family's targets.
func (b *proxyBench) report(rounds map[string][]proxyRound) {
	r := b.k.report
	r.line(kafkaProxy, "workload", "3_paths", "rounds", proxyRounds, "partitions", proxyPartitions, "replicas", proxyReplicas,
		"record_bytes", proxyRecordSize, "records", proxyRecords, "fetch_records", proxyFetchRecords, "linger_ms", proxyLinger,
		"latency_rate_per_s", proxyLatencyRate, "latency_records", proxyLatencyRecords-proxyLatencyWarmup, "e2e_records", proxyE2ERecords)
	for _, p := range []string{"direct", "proxy", "haproxy"} {
		if len(rounds[p]) > 0 {
			b.line(p, summarize(rounds[p]))
		}
	}
	b.sidecarMemory()
	b.checks(rounds)
}

// line prints one path's medians, and the CPU its runs cost the brokers, sidecars and haproxy.
func (b *proxyBench) line(path string, s proxySummary) {
	b.k.report.line(kafkaProxy, "path", path,
		"produce_records_per_s", s.produceRate, "produce_p99_ms_unthrottled", s.produceP99,
		"produce_p99_ms", s.latencyP99, "produce_avg_ms", s.latencyAvg,
		"fetch_records_per_s", s.fetchRate,
		"e2e_p99_ms", s.e2eP99, "e2e_avg_ms", s.e2eAvg,
		"brokers_cpu_s", s.cpu.brokers, "sidecars_cpu_s", s.cpu.sidecars, "haproxy_cpu_s", s.cpu.haproxy)
}

// sidecarMemory prints each sidecar's resident memory after the rounds.
func (b *proxyBench) sidecarMemory() {
	figures := []any{"after", "rounds"}
	for _, n := range b.sys.cluster.Nodes {
		figures = append(figures, "sidecar_"+n.Name()+"_rss_mb", rssMB(n.Sidecar.PID()))
	}
	b.k.report.line(kafkaProxy, figures...)
}

func produceRate(r proxyRound) float64 { return r.produce.recordsPerSec }
func fetchRate(r proxyRound) float64   { return r.fetchRate }

// checks records the family's targets, and beside them the figures that explain them.
func (b *proxyBench) checks(rounds map[string][]proxyRound) {
	r := b.k.report
	direct, proxy := rounds["direct"], rounds["proxy"]
	d, p := summarize(direct), summarize(proxy)
	meanNote := fmt.Sprintf("at %d records/s; median of %d rounds", proxyLatencyRate, proxyRounds)
	p99Note := fmt.Sprintf("at %d records/s; median of %d rounds' p99 in whole ms (the tool's resolution)", proxyLatencyRate, proxyRounds)
	e2eNote := fmt.Sprintf("EndToEndLatency; median of %d rounds", proxyRounds)
	r.check("proxy: produce records/s through the proxies ÷ direct", ratio(proxy, direct, produceRate), false, proxyMinDirectRatio, "×", spread(proxy, direct, produceRate))
	r.check("proxy: fetch records/s through the proxies ÷ direct", ratio(proxy, direct, fetchRate), false, proxyMinDirectRatio, "×", spread(proxy, direct, fetchRate))
	r.check("proxy: produce p99 added by the proxies", p.latencyP99-d.latencyP99, true, proxyMaxAddedP99Ms, " ms", p99Note)
	r.check("proxy: produce mean latency added by the proxies", p.latencyAvg-d.latencyAvg, false, 0, " ms", meanNote)
	r.check("proxy: end-to-end p99 added by the proxies", p.e2eP99-d.e2eP99, false, 0, " ms", e2eNote+", whole ms")
	r.check("proxy: end-to-end mean latency added by the proxies", p.e2eAvg-d.e2eAvg, false, 0, " ms", e2eNote)
	haproxy := rounds["haproxy"]
	if len(haproxy) == 0 {
		r.check("proxy: produce records/s through the proxies ÷ through HAProxy", math.NaN(), false, proxyMinHAProxyRatio, "×", haproxyInstall)
		r.check("proxy: fetch records/s through the proxies ÷ through HAProxy", math.NaN(), false, proxyMinHAProxyRatio, "×", haproxyInstall)
		return
	}
	h := summarize(haproxy)
	r.check("proxy: produce records/s through the proxies ÷ through HAProxy", ratio(proxy, haproxy, produceRate), false, proxyMinHAProxyRatio, "×", spread(proxy, haproxy, produceRate))
	r.check("proxy: fetch records/s through the proxies ÷ through HAProxy", ratio(proxy, haproxy, fetchRate), false, proxyMinHAProxyRatio, "×", spread(proxy, haproxy, fetchRate))
	// HAProxy against the direct path is the floor for any second hop in user space on this machine.
	r.check("proxy: produce records/s through HAProxy ÷ direct", ratio(haproxy, direct, produceRate), false, 0, "×", spread(haproxy, direct, produceRate))
	r.check("proxy: fetch records/s through HAProxy ÷ direct", ratio(haproxy, direct, fetchRate), false, 0, "×", spread(haproxy, direct, fetchRate))
	r.check("proxy: produce p99 added by HAProxy", h.latencyP99-d.latencyP99, false, 0, " ms", p99Note)
	// The sidecars carry replication on every path: what they spent beyond the direct path's is
	// the client's traffic, which haproxy carried alone on its path.
	r.check("proxy: CPU the proxies spent on the client's traffic ÷ HAProxy's", (p.cpu.sidecars-d.cpu.sidecars)/h.cpu.haproxy,
		false, 0, "×", fmt.Sprintf("sidecars' CPU beyond the direct path's, over %d rounds", proxyRounds))
}

// ratio is the median of f over a's rounds over the median over b's.
func ratio(a, b []proxyRound, f func(proxyRound) float64) float64 {
	return medianOf(a, f) / medianOf(b, f)
}

// spread says how far the rounds' own ratios ranged: each round's a against the same round's b,
// measured minutes apart at most.
func spread(a, b []proxyRound, f func(proxyRound) float64) string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range min(len(a), len(b)) {
		x := f(a[i]) / f(b[i])
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("median of %d rounds; rounds %.2f–%.2f", proxyRounds, lo, hi)
}
