package serve

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// BenchmarkProxyProduce produces 1 KiB records to a one-broker kfake cluster, directly and through
// a Proxy, with acks=all and the client's default batching: the proxy's cost on the pass-through.
func BenchmarkProxyProduce(b *testing.B) {
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			cl := benchClient(b, via)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			value := make([]byte, 1024)
			b.SetBytes(int64(len(value)))
			var wg sync.WaitGroup
			var failed error
			var mu sync.Mutex
			b.ResetTimer()
			for range b.N {
				wg.Add(1)
				cl.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						failed = err
						mu.Unlock()
					}
					wg.Done()
				})
			}
			wg.Wait()
			if failed != nil {
				b.Fatal(failed)
			}
		})
	}
}

// benchClient starts a one-broker kfake cluster with six partitions of "events" and returns a client
// producing to "events" that reaches it directly ("direct") or through a Proxy ("proxy").
func benchClient(b *testing.B, via string, opts ...kgo.Opt) *kgo.Client {
	var addr string
	if via == "proxy" {
		addr = startProxiedCluster(b, 1, ProxyOptions{Store: &echoStore{}}).addrs[0]
	} else {
		cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(6, "events"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(cluster.Close)
		addr = cluster.ListenAddrs()[0]
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("events")}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

// BenchmarkProxyRoundTrips runs the shape of make bench's kafka-*-16 scenarios: 16 goroutines, each
// producing one 1 KiB record (acks=all, no linger) and fetching it back, directly and through a Proxy.
func BenchmarkProxyRoundTrips(b *testing.B) {
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
			cl := benchClient(b, via, kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.MaxVersions(kversion.V3_0_0()))
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			value := make([]byte, 1024)
			if err := roundTrip(ctx, cl, value); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := roundTrip(ctx, cl, value); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// roundTrip produces one record and fetches it back from broker 0.
func roundTrip(ctx context.Context, cl *kgo.Client, value []byte) error {
	rec := &kgo.Record{Value: value}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return err
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = "events"
	part := kmsg.NewFetchRequestTopicPartition()
	part.Partition, part.FetchOffset, part.PartitionMaxBytes = rec.Partition, rec.Offset, 1
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	_, err := cl.Broker(0).Request(ctx, req)
	return err
}
