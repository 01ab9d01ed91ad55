package kafkawire

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkProxyProduce produces 1 KiB records to a one-broker kfake cluster, directly and through
// a Proxy, with acks=all and the client's default batching: the proxy's cost on the pass-through.
func BenchmarkProxyProduce(b *testing.B) {
	for _, via := range []string{"direct", "proxy"} {
		b.Run(via, func(b *testing.B) {
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
			cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("events"))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(cl.Close)
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
