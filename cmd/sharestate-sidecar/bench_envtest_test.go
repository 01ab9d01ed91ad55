package main_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// BenchmarkWrites measures Write throughput and latency through the sidecar over TCP
// (kafkawire.Client) against the in-process persister, on the same scenarios: W concurrent writers,
// writer i writing partition i mod P. Each reports writes/s, the p50 and p99 latency of one Write,
// and the writes the persister combined into one status update (group commit). Run it with
//
//	KUBEBUILDER_ASSETS=$(hack/envtest-assets.sh) go test ./cmd/sharestate-sidecar -run '^$' -bench Writes -benchtime 10s
//
// Both sides use a client of the same API server with no client-side rate limit; the sidecar is the
// built binary, a process of its own, as in a broker pod. "sidecar" is kafkawire.Client's default
// pool of four connections; "sidecar-1conn" pipelines everything on one, as a Kafka client would.
func BenchmarkWrites(b *testing.B) {
	testenv.Require(b, env)
	scenarios := []struct {
		writers, partitions int
		vias                []string
	}{
		{1, 1, []string{"in-process", "sidecar"}},
		{64, 1, []string{"in-process", "sidecar", "sidecar-1conn"}},
		{64, 64, []string{"in-process", "sidecar", "sidecar-1conn"}},
	}
	for _, sc := range scenarios {
		for _, via := range sc.vias {
			name := fmt.Sprintf("writers=%d/partitions=%d/%s", sc.writers, sc.partitions, via)
			b.Run(name, func(b *testing.B) {
				store, batching := benchStore(b, via)
				runWrites(b, store, batching, sc.writers, sc.partitions)
			})
		}
	}
}

// benchStore returns the Store a variant writes through, in a namespace of its own, and a reading of
// its persister's group-commit histogram (sum and count of writes per status update).
func benchStore(b *testing.B, via string) (sharestate.Store, func() (float64, float64)) {
	ns := env.Namespace(b)
	if via == "in-process" {
		return newPersister(b, ns), func() (float64, float64) { return localHistogram(b, "sharestate_persister_writes_per_update") }
	}
	s := startSidecar(b, ns, sidecarOptions{args: []string{"--kube-api-qps=-1"}})
	conns := 0 // the default
	if via == "sidecar-1conn" {
		conns = 1
	}
	return newWireClientOpts(b, kafkawire.ClientOptions{Address: s.addr, Connections: conns}), func() (float64, float64) {
		return s.histogram(b, "sharestate_persister_writes_per_update")
	}
}

// localHistogram reads a histogram of this process's registry (the in-process persister's).
func localHistogram(b *testing.B, name string) (sum, count float64) {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleSum(), float64(h.GetSampleCount())
		}
	}
	return 0, 0
}

// histogram reads an unlabelled histogram of the sidecar's /metrics.
func (s *sidecar) histogram(b *testing.B, name string) (sum, count float64) {
	for _, line := range strings.Split(s.scrape(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+"_sum "); ok {
			sum, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(line, name+"_count "); ok {
			count, _ = strconv.ParseFloat(v, 64)
		}
	}
	return sum, count
}

// The shape of every write, as test/bench writes them: a leader that acknowledges most records of
// each run of 10 offsets, rejects one and releases one, and whose start offset trails its newest
// write by 200 offsets, so the stored state stays at about 60 batches however long the run.
const (
	benchBase       int64 = 1_000_000_000_000
	offsetsPerWrite int64 = 10
	trailing        int64 = 200
)

// cursor hands out one partition's writes: the n-th covers the n-th run of offsets, so concurrent
// writers of a partition never write the same offsets.
type cursor struct{ n atomic.Int64 }

func (c *cursor) next(partition, stateEpoch int32) sharestate.WriteRequest {
	first := benchBase + (c.n.Add(1)-1)*offsetsPerWrite
	last := first + offsetsPerWrite - 1
	return one("bench", sharestate.WritePartition{
		Partition: partition, StateEpoch: stateEpoch, LeaderEpoch: 1,
		StartOffset: max(benchBase, first-trailing), DeliveryCompleteCount: -1,
		StateBatches: []sharestate.StateBatch{
			{FirstOffset: first, LastOffset: last - 2, DeliveryState: sharestate.DeliveryStateAcknowledged, DeliveryCount: 1},
			{FirstOffset: last - 1, LastOffset: last - 1, DeliveryState: sharestate.DeliveryStateArchived, DeliveryCount: 1},
			{FirstOffset: last, LastOffset: last, DeliveryState: sharestate.DeliveryStateAvailable, DeliveryCount: 1},
		},
	})
}

// prepare initializes and reads the partitions (so the clock starts on the steady state, the leader
// recorded) and returns their state epochs.
func prepare(b *testing.B, store sharestate.Store, partitions int) []int32 {
	b.Helper()
	ctx := context.Background()
	epochs := make([]int32, partitions)
	for p := range partitions {
		if r := store.Initialize(ctx, one("bench", sharestate.InitializePartition{Partition: int32(p), StateEpoch: 1, StartOffset: benchBase})); r.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatalf("initialize: %+v", r)
		}
		r := store.Read(ctx, one("bench", sharestate.ReadPartition{Partition: int32(p), LeaderEpoch: 1})).Topics[0].Partitions[0]
		if r.ErrorCode != 0 {
			b.Fatalf("read: %+v", r)
		}
		epochs[p] = r.StateEpoch
	}
	return epochs
}

// runWrites does b.N writes with the given concurrency and reports writes/s, p50, p99 and the writes
// per status update.
func runWrites(b *testing.B, store sharestate.Store, batching func() (float64, float64), writers, partitions int) {
	epochs := prepare(b, store, partitions)
	cursors := make([]cursor, partitions)
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failure atomic.Value
	var wg sync.WaitGroup
	sum0, count0 := batching()
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		p := w % partitions
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
				t0 := time.Now()
				r := store.Write(context.Background(), cursors[p].next(int32(p), epochs[p])).Topics[0].Partitions[0]
				latencies[i] = time.Since(t0)
				if r.ErrorCode != 0 {
					failure.Store(fmt.Sprintf("write %d: %s: %s", i, r.ErrorCode, r.ErrorMessage))
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if f := failure.Load(); f != nil {
		b.Fatal(f)
	}
	sum1, count1 := batching()
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "writes/s")
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
	if count1 > count0 {
		b.ReportMetric((sum1-sum0)/(count1-count0), "writes/update")
	}
	b.ReportMetric(0, "ns/op") // writes/s says it better; ns/op of a concurrent run misleads
}
