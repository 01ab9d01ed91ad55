package bench

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// The proxy family measures the sidecar's proxy on real brokers: produce and fetch through it
// against the same brokers without it, and against HAProxy in TCP mode, all on one cluster with
// sidecars. Its three paths to the same brokers:
//
//   - direct: the brokers' CLIENT listener;
//   - proxy: bootstrapped at the sidecars' proxies, which front the REPLICATION listener and which
//     it advertises, so that every request of the client passes a proxy;
//   - haproxy: bootstrapped at haproxy's frontends, which front an extra listener (HAPROXY) that
//     advertises them.
//
// Replication passes the proxies on every path: REPLICATION is the inter-broker listener, so the
// followers' fetches go through the sidecars whichever way the client came in. That is the shape a
// deployment has, and it loads every path alike; only the client's own requests differ.
//
// The paths take turns (direct, proxy, haproxy; then proxy, haproxy, direct; ...) for proxyRounds
// rounds, so that what else the machine does spreads over all three, and the figures are medians
// over the rounds.

const (
	proxyNodes      = 3
	proxyRounds     = 3
	proxyPartitions = 3
	proxyReplicas   = 3
	// proxyRecords is what each path produces per round as fast as it can, and proxyFetchRecords
	// what it then fetches from the topic's start: more, since fetching is the faster.
	proxyRecords      = 60_000
	proxyFetchRecords = 300_000
	proxyRecordSize   = 1024
	// proxyLinger is the unthrottled producer's linger.ms (Kafka 4's default): batches fill.
	proxyLinger = 5
	// The latency run produces at a rate every path sustains, one record a batch (linger.ms=0):
	// latency unthrottled is the producer's own queue (its buffer over the rate), not the path.
	proxyLatencyRate    = 1000
	proxyLatencyRecords = 4000
	proxyLatencyWarmup  = 1000
	// proxyE2ERecords is how many records EndToEndLatency sends and fetches, one at a time.
	proxyE2ERecords = 500
	// proxyWarmupRecords each path produces once before the rounds (warmUp): the brokers' code is
	// compiled, every path is known to work before any is measured, and the topic holds
	// proxyFetchRecords.
	proxyWarmupRecords = proxyFetchRecords / 3
)

// proxyBrokerJVMOptions are the brokers' JVM flags as Kafka's own scripts start a broker: a fixed
// 1 GiB heap (bin/kafka-server-start.sh, apache/kafka 376b537f) and G1 (bin/kafka-run-class.sh,
// apache/kafka b099db8b), with the JVM's full compiler. kafkacluster's defaults (a small heap that
// grows, C1 only) start quickly but made the brokers spend several times the CPU per record, and
// less of it as the heap grew: the rounds' brokers got faster from one round to the next.
var proxyBrokerJVMOptions = []string{"-Xms1g", "-Xmx1g", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
	"-XX:InitiatingHeapOccupancyPercent=35", "-Djava.awt.headless=true"}

// unthrottled sends records as fast as the path takes them, in full batches.
func unthrottled(records int) produceRun {
	return produceRun{records: records, rate: -1, lingerMs: proxyLinger}
}

// latencyRun is each round's latency run: one record a batch (linger.ms=0).
var latencyRun = produceRun{records: proxyLatencyRecords, rate: proxyLatencyRate, warmup: proxyLatencyWarmup}

const (
	proxyThroughputTopic = "proxy-throughput"
	proxyE2ETopic        = "proxy-e2e"
)

// proxyPath is one way to the brokers.
type proxyPath struct {
	name    string
	clients kafkacluster.Clients
}

// proxyRound is what one path measured in one round.
type proxyRound struct {
	produce   producePerf // unthrottled
	latency   producePerf // at proxyLatencyRate
	fetchRate float64     // records a second
	e2e       e2eLatency
	cpu       proxyCPU
	took      time.Duration
}

// proxyCPU is the CPU seconds the brokers, the sidecars and haproxy used during a path's runs.
type proxyCPU struct {
	brokers, sidecars, haproxy float64
}

// proxyBench is one run of the family.
type proxyBench struct {
	k       *kafkaRun
	sys     *kafkaSystem
	haproxy *child // nil when haproxy is not installed
	paths   []proxyPath
}

// measureProxy measures the proxy on a real broker: produce and fetch through it against the same
// brokers without it, and against HAProxy in TCP mode.
func (k *kafkaRun) measureProxy(ctx context.Context) error {
	b := &proxyBench{k: k}
	defer b.stop()
	if err := b.start(ctx); err != nil {
		return err
	}
	if err := b.setUp(ctx); err != nil {
		return err
	}
	rounds, err := b.run(ctx)
	if err != nil {
		return err
	}
	b.report(rounds)
	return nil
}

// start starts the cluster with sidecars, and haproxy in front of its HAPROXY listener if haproxy
// is installed.
func (b *proxyBench) start(ctx context.Context) error {
	front, err := b.startHAProxy(ctx)
	if err != nil {
		return err
	}
	sys, err := b.k.startSystem(ctx, "proxy", true, func(o *kafkacluster.Options) {
		o.Nodes = proxyNodes
		o.JVMOptions = proxyBrokerJVMOptions
		if front != nil {
			o.Listeners = append(o.Listeners, *front)
		}
	})
	if err != nil {
		return err
	}
	b.sys = sys
	b.paths = []proxyPath{{name: "direct", clients: sys.clients}, {name: "proxy", clients: b.bootstrapAt(proxyAddresses(sys.cluster))}}
	if front != nil {
		b.paths = append(b.paths, proxyPath{name: "haproxy", clients: b.bootstrapAt(strings.Join(byNode(front.Advertise), ","))})
	}
	return nil
}

// startHAProxy picks the brokers' HAPROXY listener and starts haproxy in front of it, before the
// cluster: its frontends' ports are then taken before the cluster's many connections could take
// one as their own port. Without haproxy on PATH it returns no listener, and the path is left out.
func (b *proxyBench) startHAProxy(ctx context.Context) (*kafkacluster.Listener, error) {
	if _, err := exec.LookPath("haproxy"); err != nil {
		b.logf("%s", haproxyInstall)
		return nil, nil
	}
	l, err := kafkacluster.FrontedListener(haproxyListener, proxyNodes)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(b.k.work, "haproxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if b.haproxy, err = startHAProxy(ctx, dir, l); err != nil {
		return nil, fmt.Errorf("starting haproxy: %w", err)
	}
	return &l, nil
}

func proxyAddresses(c *kafkacluster.Cluster) string {
	addrs := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		addrs = append(addrs, n.Sidecar.ProxyAddress)
	}
	return strings.Join(addrs, ",")
}

// bootstrapAt is the system's clients, bootstrapped at bootstrap.
func (b *proxyBench) bootstrapAt(bootstrap string) kafkacluster.Clients {
	c := b.sys.clients
	c.Bootstrap = bootstrap
	return c
}

func (b *proxyBench) stop() {
	if b.haproxy != nil {
		b.haproxy.stop()
	}
	if b.sys != nil {
		b.sys.stop()
	}
}

// setUp creates the topics and warms every path up.
func (b *proxyBench) setUp(ctx context.Context) error {
	direct := b.paths[0].clients
	if err := createTopic(ctx, direct, proxyThroughputTopic, proxyPartitions, proxyReplicas); err != nil {
		return err
	}
	// One partition: EndToEndLatency's consumer reads the one record it waits for from one leader.
	if err := createTopic(ctx, direct, proxyE2ETopic, 1, proxyReplicas); err != nil {
		return err
	}
	for _, p := range b.paths {
		b.logf("warming up %s", p.name)
		if err := b.warmUp(ctx, p); err != nil {
			return fmt.Errorf("warming up the %s path: %w", p.name, err)
		}
	}
	return nil
}

// warmUp runs through p what a round runs, unmeasured and smaller (the produce excepted, which
// fills the topic for the fetches): each kind of request the rounds send has been compiled by the
// brokers' JVMs before the first round, which otherwise measured every path slower than the next.
func (b *proxyBench) warmUp(ctx context.Context, p proxyPath) error {
	if _, err := produce(ctx, p.clients, unthrottled(proxyWarmupRecords)); err != nil {
		return err
	}
	if _, err := fetch(ctx, p.clients, proxyThroughputTopic, "proxy-warmup-"+p.name, proxyWarmupRecords); err != nil {
		return err
	}
	if _, err := produce(ctx, p.clients, produceRun{records: proxyLatencyWarmup, rate: proxyLatencyRate}); err != nil {
		return err
	}
	_, err := endToEnd(ctx, p.clients, proxyE2ETopic, proxyE2ERecords/5, proxyRecordSize)
	return err
}

func (b *proxyBench) logf(format string, args ...any) {
	fmt.Fprintf(b.k.log, "bench: kafka: proxy: "+format+"\n", args...)
}

// run measures every path proxyRounds times, in turn; it returns each path's rounds, by path.
func (b *proxyBench) run(ctx context.Context) (map[string][]proxyRound, error) {
	rounds := map[string][]proxyRound{}
	for i := range proxyRounds {
		for _, p := range rotate(b.paths, i) {
			r, err := b.measurePath(ctx, p, i)
			if err != nil {
				return nil, fmt.Errorf("round %d, %s path: %w", i+1, p.name, err)
			}
			b.logf("round %d %s: produce %.0f/s p99 %.0f ms; at %d/s p99 %.0f ms avg %.2f ms; fetch %.0f/s; e2e p99 %.0f ms avg %.3f ms; "+
				"cpu brokers %.1f s sidecars %.1f s haproxy %.1f s; took %.1f s; load1 %s",
				i+1, p.name, r.produce.recordsPerSec, r.produce.p99Ms, proxyLatencyRate, r.latency.p99Ms, r.latency.avgMs,
				r.fetchRate, r.e2e.p99Ms, r.e2e.avgMs, r.cpu.brokers, r.cpu.sidecars, r.cpu.haproxy, r.took.Seconds(), loadAverage())
			rounds[p.name] = append(rounds[p.name], r)
		}
	}
	return rounds, nil
}

// rotate is paths begun at the i-th, wrapping: each round starts with another path, so that none
// always runs first, after the others' traffic or while the machine warms up.
func rotate(paths []proxyPath, i int) []proxyPath {
	k := i % len(paths)
	return append(slices.Clone(paths[k:]), paths[:k]...)
}

// measurePath runs the four measurements on one path, one after the other.
func (b *proxyBench) measurePath(ctx context.Context, p proxyPath, round int) (proxyRound, error) {
	var r proxyRound
	var err error
	start, before := time.Now(), b.sampleCPU()
	if r.produce, err = produce(ctx, p.clients, unthrottled(proxyRecords)); err != nil {
		return r, err
	}
	group := fmt.Sprintf("proxy-fetch-%s-%d", p.name, round)
	if r.fetchRate, err = fetch(ctx, p.clients, proxyThroughputTopic, group, proxyFetchRecords); err != nil {
		return r, err
	}
	if r.latency, err = produce(ctx, p.clients, latencyRun); err != nil {
		return r, err
	}
	if r.e2e, err = endToEnd(ctx, p.clients, proxyE2ETopic, proxyE2ERecords, proxyRecordSize); err != nil {
		return r, err
	}
	r.cpu = before.until(b.sampleCPU())
	r.took = time.Since(start)
	return r, nil
}

// proxyCPUSample is the CPU time of the brokers, the sidecars and haproxy at one moment.
type proxyCPUSample struct {
	brokers, sidecars, haproxy procSample
}

func (b *proxyBench) sampleCPU() proxyCPUSample {
	var haproxy []int
	if b.haproxy != nil {
		haproxy = []int{b.haproxy.pid()}
	}
	return proxyCPUSample{brokers: sampleProcs(b.sys.nodePIDs()), sidecars: sampleProcs(b.sys.sidecarPIDs()), haproxy: sampleProcs(haproxy)}
}

func (s proxyCPUSample) until(later proxyCPUSample) proxyCPU {
	return proxyCPU{
		brokers:  cpuSeconds(s.brokers, later.brokers),
		sidecars: cpuSeconds(s.sidecars, later.sidecars),
		haproxy:  cpuSeconds(s.haproxy, later.haproxy),
	}
}

// proxySummary is one path's figures over its rounds: medians, and CPU totals.
type proxySummary struct {
	produceRate, produceP99, latencyP99, latencyAvg, fetchRate, e2eP99, e2eAvg float64
	cpu                                                                        proxyCPU
}

func summarize(rounds []proxyRound) proxySummary {
	s := proxySummary{
		produceRate: medianOf(rounds, func(r proxyRound) float64 { return r.produce.recordsPerSec }),
		produceP99:  medianOf(rounds, func(r proxyRound) float64 { return r.produce.p99Ms }),
		latencyP99:  medianOf(rounds, func(r proxyRound) float64 { return r.latency.p99Ms }),
		latencyAvg:  medianOf(rounds, func(r proxyRound) float64 { return r.latency.avgMs }),
		fetchRate:   medianOf(rounds, func(r proxyRound) float64 { return r.fetchRate }),
		e2eP99:      medianOf(rounds, func(r proxyRound) float64 { return r.e2e.p99Ms }),
		e2eAvg:      medianOf(rounds, func(r proxyRound) float64 { return r.e2e.avgMs }),
	}
	for _, r := range rounds {
		s.cpu.brokers += r.cpu.brokers
		s.cpu.sidecars += r.cpu.sidecars
		s.cpu.haproxy += r.cpu.haproxy
	}
	return s
}

// medianOf is the median of f over rounds, NaN for none.
func medianOf(rounds []proxyRound, f func(proxyRound) float64) float64 {
	if len(rounds) == 0 {
		return math.NaN()
	}
	values := make([]float64, len(rounds))
	for i, r := range rounds {
		values[i] = f(r)
	}
	return median(values)
}
