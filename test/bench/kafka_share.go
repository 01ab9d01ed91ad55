package bench

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// shareCell is one share-consumption measurement: a topic of this many partitions (replication
// factor 3), consumed by this many share consumers of one group.
type shareCell struct{ partitions, consumers int }

// shareCells are the four: 3 and 100 partitions, 1 and 4 consumers.
var shareCells = []shareCell{{3, 1}, {3, 4}, {100, 1}, {100, 4}}

// shareResult is one cell measured on one system.
type shareResult struct {
	recordsPerSec float64       // records delivered over the time from the first to the last
	firstRecord   time.Duration // from starting the consumers to the first record
	cost          costDelta
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
	for i, cell := range shareCells {
		systems := []*kafkaSystem{kafka, ours}
		if i%2 == 1 {
			systems = []*kafkaSystem{ours, kafka}
		}
		results := map[*kafkaSystem]shareResult{}
		for _, s := range systems {
			res, err := k.shareCell(ctx, s, cell)
			if err != nil {
				return fmt.Errorf("%d partitions, %d consumers, %s: %w", cell.partitions, cell.consumers, s.name, err)
			}
			results[s] = res
			k.reportShareCell(s, cell, res)
		}
		k.report.check(fmt.Sprintf("share consume, %d partitions, %d consumer(s): ours / Kafka's records/s", cell.partitions, cell.consumers),
			results[ours].recordsPerSec/results[kafka].recordsPerSec, false, 0.9, "×", "")
		k.report.check(fmt.Sprintf("persister Write mean, %d partitions, %d consumer(s): ours / Kafka's (server side)", cell.partitions, cell.consumers),
			results[ours].cost.writeMeanMs/results[kafka].cost.writeMeanMs, true, 0, "×", "")
	}
	return nil
}

// shareCell produces the cell's records to a topic of its own and times their share consumption.
func (k *kafkaRun) shareCell(ctx context.Context, s *kafkaSystem, cell shareCell) (shareResult, error) {
	topic := fmt.Sprintf("perf-p%d-c%d", cell.partitions, cell.consumers)
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
	delivered, err := consumeAll(ctx, s, topic, group, cell.consumers, k.cfg.Records)
	if err != nil {
		return shareResult{}, err
	}
	after, err := k.sampleCost(ctx, s)
	if err != nil {
		return shareResult{}, err
	}
	steady := delivered.Last.Sub(delivered.First)
	if steady <= 0 {
		return shareResult{}, fmt.Errorf("%d records delivered in one instant: too few to time", delivered.Records)
	}
	return shareResult{
		recordsPerSec: float64(delivered.Records) / steady.Seconds(),
		firstRecord:   delivered.First.Sub(started),
		cost:          after.minus(before, int64(delivered.Records)),
	}, nil
}

// consumeAll runs consumers share consumers of group (ShareTool timed-consume: Kafka's
// KafkaShareConsumer, implicit acknowledgement) until they have received records between them, and
// returns when the first and the last reached them. The rate between those two moments is the
// steady one: the consumers' start, their joining the group and the partitions' first reads of
// their share state come before the first record, and are reported apart.
func consumeAll(ctx context.Context, s *kafkaSystem, topic, group string, consumers, records int) (kafkacluster.DeliverySummary, error) {
	var all []*kafkacluster.TimedConsumer
	defer func() {
		for _, c := range all {
			c.Kill() // what they hold is never measured again: the next cell has a group of its own
		}
	}()
	for i := range consumers {
		c, err := s.clients.StartTimedConsumer(fmt.Sprintf("%s-consumer-%d", topic, i), topic, group)
		if err != nil {
			return kafkacluster.DeliverySummary{}, err
		}
		all = append(all, c)
	}
	var total kafkacluster.DeliverySummary
	done := waitFor(ctx, 10*time.Minute, func() bool {
		total = kafkacluster.DeliverySummary{}
		for _, c := range all {
			total = total.Merge(c.Summary())
		}
		return total.Records >= records
	})
	if !done {
		return total, fmt.Errorf("%d of %d records delivered in 10 minutes", total.Records, records)
	}
	return total, nil
}

func (k *kafkaRun) reportShareCell(s *kafkaSystem, cell shareCell, res shareResult) {
	c := res.cost
	k.report.line(kafkaShare, "persister", persisterName(s.ns != ""), "partitions", cell.partitions, "consumers", cell.consumers,
		"records_per_s", res.recordsPerSec, "first_record_s", res.firstRecord,
		"writes", c.writes, "write_mean_ms", c.writeMeanMs, "write_p99_ms", c.writeP99Ms,
		"state_requests", c.stateRequests,
		"broker_cpu_ms_per_1k_records", perThousand(c.brokerCPU, c.records),
		"sidecar_cpu_ms_per_1k_requests", perThousand(c.sidecarCPU, c.stateRequests),
		"sidecar_rss_mb_max", c.sidecarRSSMax,
		"apiserver_cpu_ms_per_write", perOne(c.apiserverCPU, c.writes),
		"operator_cpu_ms_per_write", perOne(c.operatorCPU, c.writes))
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
