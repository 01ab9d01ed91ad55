package bench

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// shareStateAPIs are Kafka's names of the five share-state RPCs (API keys 83–87).
var shareStateAPIs = []string{"InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
	"DeleteShareGroupState", "ReadShareGroupStateSummary"}

// costSample is what a system has used and served up to one moment: CPU seconds of its processes,
// and the share-state requests its persister answered with their server-side times. Ours are read
// from the sidecars' metrics; Kafka's from each broker's request metrics (JMX: the share coordinator
// answers them on the brokers).
type costSample struct {
	brokers, sidecars, apiserver, etcd, operator procSample
	sidecarRSS                                   []float64

	// Ours only, from the sidecars' persister metrics: the status updates stored (one per partition
	// per group commit), the partitions' Writes they carried, and the bytes of the statuses stored.
	statusUpdates, partitionWrites, statusBytes float64
	// persisterWrite is the persisters' time for a partition's Write (queue, status update, answer),
	// ours only: the sidecar's request time less this is the wire and the proxy's.
	persisterWrite requestTime
	// statusUpdate is the persisters' time for one status update, from encoding the object to
	// decoding the answer, ours only: a Write's time less this is its wait behind the update in
	// flight, and this less kube-apiserver's own time is the client's and the connection's.
	statusUpdate requestTime
	// conflicts are the persisters' status updates refused as conflicting, gets their reads of an
	// object (after a conflict, or with none cached), ours only.
	conflicts, gets float64
	// statusPUT is kube-apiserver's own time for the partitions' status updates (PUT), ours only.
	statusPUT requestTime

	stateRequests float64
	writes        float64
	writeSumMs    float64
	// writeBuckets are the sidecars' Write duration histogram, cumulative counts by upper bound
	// (seconds), summed over the sidecars.
	writeBuckets map[float64]float64
	// kafkaWriteP99Ms is the highest of the brokers' WriteShareGroupState TotalTimeMs
	// 99thPercentile: Kafka's histograms keep a decaying sample of about the last five minutes.
	kafkaWriteP99Ms float64
}

// costDelta is a cell's cost: the difference of two samples, and the records it consumed.
type costDelta struct {
	records, stateRequests, writes float64
	writeMeanMs, writeP99Ms        float64
	brokerCPU, sidecarCPU          float64
	apiserverCPU, etcdCPU          float64
	operatorCPU                    float64
	sidecarRSSMax                  float64
	statusUpdates, partitionWrites float64
	conflicts, gets                float64
	statusBytesMean                float64
	statusPUTMeanMs                float64       // kube-apiserver's own time per status update
	persisterWriteMeanMs           float64       // the persister's time per partition Write
	statusUpdateMeanMs             float64       // the persister's time per status update
	window                         time.Duration // between the two samples
}

// serverCPU is the CPU of every server process of the system: brokers, sidecars, kube-apiserver,
// etcd and the operator (the consumers are apart).
func (d costDelta) serverCPU() float64 {
	return d.brokerCPU + d.sidecarCPU + d.apiserverCPU + d.etcdCPU + d.operatorCPU
}

// sampleCost reads a system's costSample.
func (k *kafkaRun) sampleCost(ctx context.Context, s *kafkaSystem) (costSample, error) {
	c, err := k.sampleProcesses(ctx, s)
	if err != nil || s.ns != "" {
		return c, err
	}
	return c, c.readBrokers(ctx, s)
}

// sampleProcesses reads what is cheap to read while a cell runs: the processes' CPU and memory and,
// for ours, the sidecars' metrics. Kafka's request metrics need a JVM of their own (JMX) and are left
// out.
func (k *kafkaRun) sampleProcesses(ctx context.Context, s *kafkaSystem) (costSample, error) {
	c := costSample{
		brokers: sampleProcs(s.nodePIDs()), sidecars: sampleProcs(s.sidecarPIDs()),
		apiserver: sampleProcs(controlPlanePIDs("kube-apiserver")), etcd: sampleProcs(controlPlanePIDs("etcd")),
		operator:     sampleProcs(s.operatorPIDs()),
		writeBuckets: map[float64]float64{},
	}
	for _, pid := range s.sidecarPIDs() {
		c.sidecarRSS = append(c.sidecarRSS, rssMB(pid))
	}
	if s.ns == "" {
		return c, nil
	}
	times := statusRequestTimes(ctx, k.env.Config)
	if times == nil {
		return c, fmt.Errorf("reading kube-apiserver's request metrics")
	}
	c.statusPUT = times["PUT"]
	return c, c.readSidecars(s)
}

// controlPlanePIDs are the bench's child processes of that name: the control plane's kube-apiserver
// or etcd.
func controlPlanePIDs(name string) []int {
	procs, err := childProcesses(name)
	if err != nil {
		return nil
	}
	var pids []int
	for _, p := range procs {
		pids = append(pids, p.pid)
	}
	return pids
}

func (s *kafkaSystem) operatorPIDs() []int {
	if s.operator == nil {
		return nil
	}
	return []int{s.operator.PID()}
}

// readSidecars sums the sidecars' share-state requests and their Write duration histogram.
func (c *costSample) readSidecars(s *kafkaSystem) error {
	for _, n := range s.cluster.Nodes {
		page, err := n.Sidecar.Metrics()
		if err != nil {
			return fmt.Errorf("scraping %s's sidecar: %w", n.Name(), err)
		}
		for series, v := range metricSeries(page) {
			switch {
			case series == "sharestate_persister_writes_per_update_count":
				c.statusUpdates += v
			case series == "sharestate_persister_writes_per_update_sum":
				c.partitionWrites += v
			case series == "sharestate_persister_write_duration_seconds_sum":
				c.persisterWrite.seconds += v
			case series == "sharestate_persister_write_duration_seconds_count":
				c.persisterWrite.count += v
			case series == "sharestate_persister_status_update_duration_seconds_sum":
				c.statusUpdate.seconds += v
			case series == "sharestate_persister_status_update_duration_seconds_count":
				c.statusUpdate.count += v
			case series == "sharestate_persister_conflicts_total":
				c.conflicts += v
			case strings.HasPrefix(series, `sharestate_persister_api_requests_total{`) && strings.Contains(series, `verb="get"`):
				c.gets += v
			case series == "sharestate_persister_status_bytes_sum":
				c.statusBytes += v
			case strings.HasPrefix(series, "sharestate_sidecar_requests_total{"):
				c.stateRequests += v
			case strings.HasPrefix(series, `sharestate_sidecar_request_duration_seconds_count{api="WriteShareGroupState"}`):
				c.writes += v
			case strings.HasPrefix(series, `sharestate_sidecar_request_duration_seconds_sum{api="WriteShareGroupState"}`):
				c.writeSumMs += v * 1000
			case strings.HasPrefix(series, `sharestate_sidecar_request_duration_seconds_bucket{api="WriteShareGroupState",le="`):
				le, err := strconv.ParseFloat(strings.TrimSuffix(strings.Split(series, `le="`)[1], `"}`), 64)
				if err == nil {
					c.writeBuckets[le] += v
				}
			}
		}
	}
	return nil
}

// metricSeries parses a Prometheus text page into its series (name and labels, as written) and values.
func metricSeries(page string) map[string]float64 {
	out := map[string]float64{}
	for line := range strings.Lines(page) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// readBrokers reads each broker's request metrics for the five share-state RPCs over JMX.
func (c *costSample) readBrokers(ctx context.Context, s *kafkaSystem) error {
	objects := make([]string, 0, len(shareStateAPIs))
	for _, api := range shareStateAPIs {
		objects = append(objects, "kafka.network:type=RequestMetrics,name=TotalTimeMs,request="+api)
	}
	args := []string{"jmx", strings.Join(objects, ";"), "Count,Mean,99thPercentile"}
	for _, pid := range s.nodePIDs() {
		args = append(args, strconv.Itoa(pid))
	}
	out, err := s.clients.Run(ctx, "ShareTool", args...)
	if err != nil {
		return err
	}
	type key struct{ pid, object string }
	values := map[key]map[string]float64{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		v, err := strconv.ParseFloat(f[3], 64)
		if err != nil || v < 0 {
			continue
		}
		k := key{f[0], f[1]}
		if values[k] == nil {
			values[k] = map[string]float64{}
		}
		values[k][f[2]] = v
	}
	for k, attrs := range values {
		c.stateRequests += attrs["Count"]
		if strings.HasSuffix(k.object, "=WriteShareGroupState") {
			c.writes += attrs["Count"]
			c.writeSumMs += attrs["Count"] * attrs["Mean"]
			c.kafkaWriteP99Ms = max(c.kafkaWriteP99Ms, attrs["99thPercentile"])
		}
	}
	return nil
}

// minus is the cost between before and c, for records consumed.
func (c costSample) minus(before costSample, records int64) costDelta {
	d := costDelta{
		records:              float64(records),
		window:               c.brokers.at.Sub(before.brokers.at),
		stateRequests:        c.stateRequests - before.stateRequests,
		writes:               c.writes - before.writes,
		brokerCPU:            cpuSeconds(before.brokers, c.brokers),
		sidecarCPU:           cpuSeconds(before.sidecars, c.sidecars),
		apiserverCPU:         cpuSeconds(before.apiserver, c.apiserver),
		etcdCPU:              cpuSeconds(before.etcd, c.etcd),
		operatorCPU:          cpuSeconds(before.operator, c.operator),
		statusUpdates:        c.statusUpdates - before.statusUpdates,
		partitionWrites:      c.partitionWrites - before.partitionWrites,
		conflicts:            c.conflicts - before.conflicts,
		gets:                 c.gets - before.gets,
		statusBytesMean:      math.NaN(),
		statusPUTMeanMs:      math.NaN(),
		persisterWriteMeanMs: math.NaN(),
		statusUpdateMeanMs:   math.NaN(),
		sidecarRSSMax:        math.NaN(),
		writeMeanMs:          math.NaN(),
		writeP99Ms:           math.NaN(),
	}
	if len(c.sidecarRSS) > 0 {
		d.sidecarRSSMax = slices.Max(c.sidecarRSS)
	}
	if d.statusUpdates > 0 {
		d.statusBytesMean = (c.statusBytes - before.statusBytes) / d.statusUpdates
	}
	was := before.statusPUT
	if math.IsNaN(was.count) { // none yet when before was read
		was = requestTime{}
	}
	if puts := c.statusPUT.count - was.count; puts > 0 {
		d.statusPUTMeanMs = (c.statusPUT.seconds - was.seconds) / puts * 1000
	}
	if n := c.persisterWrite.count - before.persisterWrite.count; n > 0 {
		d.persisterWriteMeanMs = (c.persisterWrite.seconds - before.persisterWrite.seconds) / n * 1000
	}
	if n := c.statusUpdate.count - before.statusUpdate.count; n > 0 {
		d.statusUpdateMeanMs = (c.statusUpdate.seconds - before.statusUpdate.seconds) / n * 1000
	}
	if d.writes > 0 {
		d.writeMeanMs = (c.writeSumMs - before.writeSumMs) / d.writes
	}
	if len(c.writeBuckets) > 0 {
		d.writeP99Ms = bucketQuantile(0.99, c.writeBuckets, before.writeBuckets) * 1000
	} else if c.kafkaWriteP99Ms > 0 {
		d.writeP99Ms = c.kafkaWriteP99Ms
	}
	return d
}

// bucketQuantile is the q-quantile of the observations between two cumulative histograms, by
// linear interpolation within the bucket it falls in, as Prometheus's histogram_quantile does.
func bucketQuantile(q float64, after, before map[float64]float64) float64 {
	bounds := make([]float64, 0, len(after))
	for le := range after {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	total := after[math.Inf(1)] - before[math.Inf(1)]
	if total <= 0 {
		return math.NaN()
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, le := range bounds {
		count := after[le] - before[le]
		if count >= rank {
			if math.IsInf(le, 1) {
				return lower
			}
			if count == below {
				return le
			}
			return lower + (le-lower)*(rank-below)/(count-below)
		}
		lower, below = le, count
	}
	return lower
}
