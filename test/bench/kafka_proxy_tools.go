package bench

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// This file runs Kafka's own performance tools (kafka-tools' ProducerPerformance,
// ConsumerPerformance and EndToEndLatency, each a JVM of its own) against one path to the brokers,
// and reads their summaries.

// createTopic creates topic with Kafka's TopicCommand (kafka-topics.sh).
func createTopic(ctx context.Context, c kafkacluster.Clients, topic string, partitions, replicas int) error {
	_, err := c.Run(ctx, "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", c.Bootstrap, "--create",
		"--topic", topic, "--partitions", fmt.Sprint(partitions), "--replication-factor", fmt.Sprint(replicas))
	return err
}

// producePerf is ProducerPerformance's summary. Its latencies are from each send to its
// acknowledgement; the percentiles are whole milliseconds, truncated (the tool's resolution).
type producePerf struct {
	recordsPerSec       float64
	avgMs, p50Ms, p99Ms float64
	steadyState         bool // the summary of the records after --warmup-records
	records             int64
}

// produceRun is one ProducerPerformance run: records to send, at rate records a second (-1: as
// fast as it can) with lingerMs, the first warmup of them left out of the summary.
type produceRun struct {
	records, rate, lingerMs, warmup int
}

// produce runs ProducerPerformance to the throughput topic: records of proxyRecordSize bytes with
// acks=all.
func produce(ctx context.Context, c kafkacluster.Clients, run produceRun) (producePerf, error) {
	args := []string{"--bootstrap-server", c.Bootstrap, "--topic", proxyThroughputTopic,
		"--num-records", fmt.Sprint(run.records), "--record-size", fmt.Sprint(proxyRecordSize), "--throughput", fmt.Sprint(run.rate),
		"--reporting-interval", "60000",
		"--command-property", "acks=all", fmt.Sprintf("linger.ms=%d", run.lingerMs)}
	if run.warmup > 0 {
		args = append(args, "--warmup-records", fmt.Sprint(run.warmup))
	}
	out, err := c.Run(ctx, "org.apache.kafka.tools.ProducerPerformance", args...)
	if err != nil {
		return producePerf{}, err
	}
	p, err := parseProducerPerformance(out)
	if err != nil {
		return p, err
	}
	if want := int64(run.records - run.warmup); p.records != want {
		return p, fmt.Errorf("ProducerPerformance summed %d records, not %d:\n%s", p.records, want, out)
	}
	return p, nil
}

// producerSummary is ProducerPerformance's final line (Stats.printTotal), the steady state's
// marked as such: "100000 records sent, 41152.263374 records/sec (40.19 MB/sec), 512.03 ms avg
// latency, 901.00 ms max latency, 538 ms 50th, 800 ms 95th, 880 ms 99th, 899 ms 99.9th."
var producerSummary = regexp.MustCompile(`(?m)^(\d+)( steady state)? records sent, ([0-9.]+) records/sec \([0-9.]+ MB/sec\), ` +
	`([0-9.]+) ms avg latency, [0-9.]+ ms max latency, (\d+) ms 50th, \d+ ms 95th, (\d+) ms 99th, \d+ ms 99\.9th\.`)

// parseProducerPerformance reads the steady state's summary if there is one, else the whole run's.
func parseProducerPerformance(out string) (producePerf, error) {
	var found []producePerf
	for _, m := range producerSummary.FindAllStringSubmatch(out, -1) {
		p := producePerf{steadyState: m[2] != ""}
		var errs [5]error
		p.records, errs[0] = strconv.ParseInt(m[1], 10, 64)
		p.recordsPerSec, errs[1] = strconv.ParseFloat(m[3], 64)
		p.avgMs, errs[2] = strconv.ParseFloat(m[4], 64)
		p.p50Ms, errs[3] = strconv.ParseFloat(m[5], 64)
		p.p99Ms, errs[4] = strconv.ParseFloat(m[6], 64)
		for _, err := range errs {
			if err != nil {
				return p, fmt.Errorf("ProducerPerformance's summary %q: %w", m[0], err)
			}
		}
		found = append(found, p)
	}
	for _, p := range found {
		if p.steadyState {
			return p, nil
		}
	}
	if len(found) == 0 {
		return producePerf{}, fmt.Errorf("no summary in ProducerPerformance's output:\n%s", out)
	}
	return found[len(found)-1], nil
}

// fetch runs ConsumerPerformance: a consumer of a new group reads records records of topic from
// its start, and returns its fetch rate: records a second from the first record to the last, the
// group's join left out (fetch.nMsg.sec).
func fetch(ctx context.Context, c kafkacluster.Clients, topic, group string, records int) (float64, error) {
	out, err := c.Run(ctx, "org.apache.kafka.tools.ConsumerPerformance", "--bootstrap-server", c.Bootstrap,
		"--topic", topic, "--group", group, "--num-records", fmt.Sprint(records), "--timeout", "30000")
	if err != nil {
		return 0, err
	}
	summary, err := parseConsumerPerformance(out)
	if err != nil {
		return 0, err
	}
	// It stops at the end of the poll that reached records, so it may count a few more.
	if got, err := strconv.Atoi(summary["data.consumed.in.nMsg"]); err != nil || got < records {
		return 0, fmt.Errorf("ConsumerPerformance consumed %s records, not %d:\n%s", summary["data.consumed.in.nMsg"], records, out)
	}
	rate, err := strconv.ParseFloat(summary["fetch.nMsg.sec"], 64)
	if err != nil {
		return 0, fmt.Errorf("ConsumerPerformance's fetch.nMsg.sec: %w\n%s", err, out)
	}
	return rate, nil
}

// parseConsumerPerformance pairs ConsumerPerformance's summary, a header line of comma-separated
// names and a line of values, by name.
func parseConsumerPerformance(out string) (map[string]string, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := 0; i+1 < len(lines); i++ {
		if !strings.HasPrefix(lines[i], "start.time,") {
			continue
		}
		names, values := strings.Split(lines[i], ","), strings.Split(lines[i+1], ",")
		if len(values) != len(names) {
			break
		}
		summary := map[string]string{}
		for j, name := range names {
			summary[strings.TrimSpace(name)] = strings.TrimSpace(values[j])
		}
		return summary, nil
	}
	return nil, fmt.Errorf("no summary in ConsumerPerformance's output:\n%s", out)
}

// e2eLatency is EndToEndLatency's summary: per record, from its send to its arrival at a consumer
// that polls the topic without waiting (fetch.max.wait.ms=0), one record at a time. Its average
// has microseconds; its percentiles are whole milliseconds, truncated (the tool's resolution).
type e2eLatency struct {
	avgMs, p50Ms, p99Ms float64
}

// endToEnd runs EndToEndLatency: records records of size bytes, acks=all, one at a time.
func endToEnd(ctx context.Context, c kafkacluster.Clients, topic string, records, size int) (e2eLatency, error) {
	out, err := c.Run(ctx, "org.apache.kafka.tools.EndToEndLatency", "--bootstrap-server", c.Bootstrap, "--topic", topic,
		"--num-records", fmt.Sprint(records), "--producer-acks", "all", "--record-size", fmt.Sprint(size))
	if err != nil {
		return e2eLatency{}, err
	}
	return parseEndToEndLatency(out)
}

var (
	e2eAverage     = regexp.MustCompile(`(?m)^Avg latency: ([0-9.]+) ms`)
	e2ePercentiles = regexp.MustCompile(`(?m)^Percentiles: 50th = (\d+), 99th = (\d+), 99\.9th = \d+`)
)

func parseEndToEndLatency(out string) (e2eLatency, error) {
	avg, pct := e2eAverage.FindStringSubmatch(out), e2ePercentiles.FindStringSubmatch(out)
	if avg == nil || pct == nil {
		return e2eLatency{}, fmt.Errorf("no summary in EndToEndLatency's output:\n%s", out)
	}
	var l e2eLatency
	var errs [3]error
	l.avgMs, errs[0] = strconv.ParseFloat(avg[1], 64)
	l.p50Ms, errs[1] = strconv.ParseFloat(pct[1], 64)
	l.p99Ms, errs[2] = strconv.ParseFloat(pct[2], 64)
	for _, err := range errs {
		if err != nil {
			return l, fmt.Errorf("EndToEndLatency's summary: %w\n%s", err, out)
		}
	}
	return l, nil
}
