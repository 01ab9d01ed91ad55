package main_test

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// advertised is a broker's real listener that names the proxy in front of it as its address, as
// advertised.listeners would.
type advertised struct {
	net.Listener
	proxy string
}

func (l advertised) Addr() net.Addr {
	a, _ := net.ResolveTCPAddr("tcp", l.proxy)
	return a
}

// TestProxyMode runs the sidecar binary in proxy mode in front of a kfake broker that advertises the
// proxy: a franz-go client produces and consumes through it, and the share-state requests it sends
// on the same proxy are answered by the persister (they would fail at kfake, which serves none of
// keys 83–87).
func TestProxyMode(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	proxyAddr := freeAddr(t)
	var upstream string
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "events"),
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			ln, err := net.Listen(network, "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			upstream = ln.Addr().String()
			return advertised{Listener: ln, proxy: proxyAddr}, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	s := startSidecar(t, ns, sidecarOptions{args: []string{"--proxy-listen-address=" + proxyAddr, "--proxy-upstream-address=" + upstream}})

	k := newKafka(t, proxyAddr, kgo.DefaultProduceTopic("events"), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	expectCode(t, "initialize through the proxy", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const records = 100
	for i := range records {
		if err := k.cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("producing through the proxy: %v", err)
		}
	}
	expectCode(t, "write through the proxy", k.write("g", writeOf(1, 3, 0, -1, batch{0, 9, 2, 1})).ErrorCode, nil, errNone)
	got := 0
	for got < records {
		fetches := k.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records through the proxy", got, records)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != fmt.Sprint(got) {
				t.Fatalf("record %d is %q", got, r.Value)
			}
			got++
		})
	}
	expectBatches(t, "read through the proxy", k.read("g", 0, 3), batch{0, 9, 2, 1})

	for sample, want := range map[string]string{
		`sharestate_proxy_requests_total{api="InitializeShareGroupState",route="answered"}`: "1",
		`sharestate_proxy_requests_total{api="WriteShareGroupState",route="answered"}`:      "1",
		`sharestate_proxy_requests_total{api="ReadShareGroupState",route="answered"}`:       "1",
		`sharestate_proxy_requests_total{api="Produce",route="forwarded"}`:                  fmt.Sprint(records),
	} {
		if got := s.metric(t, sample); got != want {
			t.Errorf("%s = %q, want %q", sample, got, want)
		}
	}
}
