package bench

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// ShareCell is one share-consumption measurement: a topic of this many partitions (replication
// factor 3), consumed by this many share consumers of one group.
type ShareCell struct{ partitions, consumers int }

// DefaultShareCells are the four measured by default: 3 and 100 partitions, 1 and 4 consumers.
var DefaultShareCells = []ShareCell{{3, 1}, {3, 4}, {100, 1}, {100, 4}}

func (c ShareCell) String() string { return fmt.Sprintf("%dx%d", c.partitions, c.consumers) }

// ParseShareCells reads a comma-separated list of cells written PARTITIONSxCONSUMERS, e.g. "100x1,100x4".
func ParseShareCells(s string) ([]ShareCell, error) {
	var cells []ShareCell
	for _, f := range strings.Split(s, ",") {
		p, c, ok := strings.Cut(strings.TrimSpace(f), "x")
		partitions, perr := strconv.Atoi(p)
		consumers, cerr := strconv.Atoi(c)
		if !ok || perr != nil || cerr != nil || partitions < 1 || consumers < 1 {
			return nil, fmt.Errorf("share cell %q: want PARTITIONSxCONSUMERS, both whole numbers of at least 1 (e.g. 100x4)", f)
		}
		cells = append(cells, ShareCell{partitions: partitions, consumers: consumers})
	}
	return cells, nil
}

// shareResult is one cell measured on one system.
type shareResult struct {
	recordsPerSec float64       // records delivered over the time from the first to the last
	firstRecord   time.Duration // from starting the consumers to the first record
	cost          costDelta
	// steady is the cost from the first record delivered to the end: the partitions' first Reads
	// and the consumers' start are left out. Only its CPU and status updates are meaningful (Kafka's
	// request metrics are not read at the first record).
	steady      costDelta
	consumerCPU float64 // seconds, the consumers' processes from their start (JVM start included)
}

// measureShare runs every cell on two clusters started side by side, one with Kafka's own persister
// and one with ours, alternating which goes first so that a slow spell of the machine does not fall
// on one of them only. Each cell produces its records with Kafka's ProducerPerformance and consumes
// them with Kafka's KafkaShareConsumer (implicit acknowledgement: each poll accepts the records of the
// one before). ShareConsumerPerformance would time the consumers' start and the partitions' first
// reads with the consumption: at 100 partitions those dominate a short run.
func (k *kafkaRun) measureShare(ctx context.Context) error {
	kafka, err := k.startSystem(ctx, "share-kafka", false, nil)
	if err != nil {
		return err
	}
	defer kafka.stop()
	ours, err := k.startSystem(ctx, "share-ours", true, nil)
	if err != nil {
		return err
	}
	defer ours.stop()
	cells := k.cfg.ShareCells
	if len(cells) == 0 {
		cells = DefaultShareCells
	}
	trials := max(k.cfg.ShareTrials, 1)
	for i, cell := range cells {
		results := map[*kafkaSystem][]shareResult{}
		for trial := range trials {
			// Alternate which system goes first, cell by cell and trial by trial, so that a slow
			// spell of the machine does not fall on one of them only.
			systems := []*kafkaSystem{kafka, ours}
			if (i+trial)%2 == 1 {
				systems = []*kafkaSystem{ours, kafka}
			}
			for _, s := range systems {
				res, err := k.measureShareCell(ctx, s, cell, trial)
				if err != nil {
					return fmt.Errorf("%d partitions, %d consumers, %s: %w", cell.partitions, cell.consumers, s.name, err)
				}
				results[s] = append(results[s], res)
				k.reportShareCell(s, cell, trial, res)
			}
		}
		rate := func(r shareResult) float64 { return r.recordsPerSec }
		writeMean := func(r shareResult) float64 { return r.cost.writeMeanMs }
		k.report.check(fmt.Sprintf("share consume, %d partitions, %d consumer(s): ours / Kafka's records/s, median of %d", cell.partitions, cell.consumers, trials),
			medianShare(results[ours], rate)/medianShare(results[kafka], rate), false, 0.9, "×", "")
		k.report.check(fmt.Sprintf("persister Write mean, %d partitions, %d consumer(s): ours / Kafka's (server side), median of %d", cell.partitions, cell.consumers, trials),
			medianShare(results[ours], writeMean)/medianShare(results[kafka], writeMean), true, 0, "×", "")
	}
	return nil
}

// medianShare is the median of f over a system's trials of one cell.
func medianShare(results []shareResult, f func(shareResult) float64) float64 {
	values := make([]float64, 0, len(results))
	for _, r := range results {
		values = append(values, f(r))
	}
	return median(values)
}

// measureShareCell produces the cell's records to a topic of its own and times their share consumption.
func (k *kafkaRun) measureShareCell(ctx context.Context, s *kafkaSystem, cell ShareCell, trial int) (shareResult, error) {
	topic := fmt.Sprintf("perf-p%d-c%d-t%d", cell.partitions, cell.consumers, trial)
	group := topic + "-share"
	if _, err := s.clients.Setup(ctx, topic, cell.partitions, 3, group); err != nil {
		return shareResult{}, err
	}
	records := strconv.Itoa(k.cfg.Records)
	if _, err := s.clients.Run(ctx, "org.apache.kafka.tools.ProducerPerformance", "--topic", topic,
		"--num-records", records, "--record-size", "100", "--throughput", "-1",
		"--producer-props", "bootstrap.servers="+s.clients.Bootstrap, "acks=all", "linger.ms=10", "batch.size=131072"); err != nil {
		return shareResult{}, err
	}
	before, err := k.sampleCost(ctx, s)
	if err != nil {
		return shareResult{}, err
	}
	started := time.Now()
	profiled := k.profileAPIServer(ctx, s, cell)
	var atFirst costSample
	var atFirstErr error
	recordsAtFirst := 0
	onFirst := func(records int) {
		atFirst, atFirstErr = k.sampleProcesses(ctx, s)
		recordsAtFirst = records
	}
	delivered, consumerCPU, err := consumeAll(ctx, s, topic, group, cell.consumers, k.cfg.Records, onFirst)
	if err == nil {
		err = atFirstErr
	}
	if err != nil {
		return shareResult{}, err
	}
	after, err := k.sampleCost(ctx, s)
	if err != nil {
		return shareResult{}, err
	}
	if err := <-profiled; err != nil {
		fmt.Fprintf(k.log, "bench: kafka: profiling kube-apiserver: %v\n", err)
	}
	steady := delivered.Last.Sub(delivered.First)
	if steady <= 0 {
		return shareResult{}, fmt.Errorf("%d records delivered in one instant: too few to time", delivered.Records)
	}
	return shareResult{
		recordsPerSec: float64(delivered.Records) / steady.Seconds(),
		firstRecord:   delivered.First.Sub(started),
		cost:          after.minus(before, int64(delivered.Records)),
		steady:        after.minus(atFirst, int64(delivered.Records-recordsAtFirst)),
		consumerCPU:   consumerCPU,
	}, nil
}

// apiserverProfileLength is how long kube-apiserver is profiled from a cell's start: it covers the
// consumers' start (about 5 s) and most of the steady consumption at 100 partitions.
const apiserverProfileLength = 10 * time.Second

// profileAPIServer fetches kube-apiserver's CPU profile of the first seconds of one of our cells
// into the profile directory, in the background; the channel gets its error. Without a profile
// directory, or for Kafka's persister (which does not use kube-apiserver), it does nothing.
func (k *kafkaRun) profileAPIServer(ctx context.Context, s *kafkaSystem, cell ShareCell) <-chan error {
	done := make(chan error, 1)
	if k.profileDir == "" || s.ns == "" {
		done <- nil
		return done
	}
	path := filepath.Join(k.profileDir, fmt.Sprintf("kafka-share-%s.apiserver.pprof", cell))
	go func() { done <- saveAPIServerProfile(ctx, k.env.Config, "profile", apiserverProfileLength, path) }()
	return done
}

// consumeAll runs consumers share consumers of group (ShareTool timed-consume: Kafka's
// KafkaShareConsumer, implicit acknowledgement) until they have received records between them, and
// returns when the first and the last reached them. The rate between those two moments is the
// steady one: the consumers' start, their joining the group and the partitions' first reads of
// their share state come before the first record, and are reported apart. It also returns the CPU
// seconds the consumers' processes used. onFirst is called once, with the records delivered so far,
// at the first look that finds any.
func consumeAll(ctx context.Context, s *kafkaSystem, topic, group string, consumers, records int, onFirst func(records int)) (kafkacluster.DeliverySummary, float64, error) {
	var all []*kafkacluster.TimedConsumer
	defer func() {
		for _, c := range all {
			c.Kill() // what they hold is never measured again: the next cell has a group of its own
		}
	}()
	for i := range consumers {
		c, err := s.clients.StartTimedConsumer(fmt.Sprintf("%s-consumer-%d", topic, i), topic, group)
		if err != nil {
			return kafkacluster.DeliverySummary{}, 0, err
		}
		all = append(all, c)
	}
	var total kafkacluster.DeliverySummary
	done := waitFor(ctx, 10*time.Minute, func() bool {
		total = kafkacluster.DeliverySummary{}
		for _, c := range all {
			total = total.Merge(c.Summary())
		}
		if total.Records > 0 && onFirst != nil {
			onFirst(total.Records)
			onFirst = nil
		}
		return total.Records >= records
	})
	if !done {
		return total, 0, fmt.Errorf("%d of %d records delivered in 10 minutes", total.Records, records)
	}
	return total, consumersCPU(all), nil
}

// consumersCPU is the CPU seconds the consumers' processes have used since they started.
func consumersCPU(consumers []*kafkacluster.TimedConsumer) float64 {
	sum := 0.0
	for _, c := range consumers {
		if used, err := readCPU(c.PID()); err == nil {
			sum += used.Seconds()
		}
	}
	return sum
}

func (k *kafkaRun) reportShareCell(s *kafkaSystem, cell ShareCell, trial int, res shareResult) {
	c := res.cost
	k.report.line(kafkaShare, "persister", persisterName(s.ns != ""), "partitions", cell.partitions, "consumers", cell.consumers, "trial", trial+1,
		"records_per_s", res.recordsPerSec, "first_record_s", res.firstRecord,
		"writes", c.writes, "write_mean_ms", c.writeMeanMs, "write_p99_ms", c.writeP99Ms,
		"state_requests", c.stateRequests,
		"broker_cpu_ms_per_1k_records", perThousand(c.brokerCPU, c.records),
		"sidecar_cpu_ms_per_1k_requests", perThousand(c.sidecarCPU, c.stateRequests),
		"sidecar_rss_mb_max", c.sidecarRSSMax,
		"apiserver_cpu_ms_per_write", perOne(c.apiserverCPU, c.writes),
		"etcd_cpu_ms_per_write", perOne(c.etcdCPU, c.writes),
		"operator_cpu_ms_per_write", perOne(c.operatorCPU, c.writes),
		"partition_writes", c.partitionWrites, "status_updates", c.statusUpdates, "status_bytes_mean", c.statusBytesMean,
		"apiserver_cpu_ms_per_status_update", perOne(c.apiserverCPU, c.statusUpdates),
		"apiserver_status_put_mean_ms", c.statusPUTMeanMs,
		"server_cpu_ms_per_1k_records", perThousand(c.serverCPU(), c.records),
		"server_cores", c.serverCPU()/c.window.Seconds(),
		"steady_server_cores", res.steady.serverCPU()/res.steady.window.Seconds(),
		"steady_server_cpu_ms_per_1k_records", perThousand(res.steady.serverCPU(), res.steady.records),
		"steady_status_updates_per_s", res.steady.statusUpdates/res.steady.window.Seconds(),
		"steady_apiserver_cpu_ms_per_status_update", perOne(res.steady.apiserverCPU, res.steady.statusUpdates),
		"steady_apiserver_status_put_mean_ms", res.steady.statusPUTMeanMs,
		"steady_persister_write_mean_ms", res.steady.persisterWriteMeanMs,
		"steady_persister_status_update_mean_ms", res.steady.statusUpdateMeanMs,
		"steady_conflicts", res.steady.conflicts, "steady_gets", res.steady.gets,
		"consumer_cpu_s", res.consumerCPU)
}

// perThousand is seconds per 1,000 of n, in milliseconds; NaN for none.
func perThousand(seconds, n float64) float64 {
	if n <= 0 {
		return math.NaN()
	}
	return seconds * 1000 / n * 1000
}

// perOne is seconds per one of n, in milliseconds; NaN for none.
func perOne(seconds, n float64) float64 {
	if n <= 0 {
		return math.NaN()
	}
	return seconds * 1000 / n
}

// waitFor polls cond every 200 ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
	return true
}
