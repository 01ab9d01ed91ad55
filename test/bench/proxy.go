package bench

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire/serve"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// The proxy scenarios measure the sidecar's proxy mode, each against its baseline in the same run:
//
//   - kafka-proxy-16 against kafka-direct-16, and kafka-proxy-1 against kafka-direct-1: Kafka
//     traffic (a Produce, then a Fetch of the record produced) by 16 concurrent writers, or one,
//     through a serve.Proxy to a one-broker kfake cluster that advertises the proxy, against the
//     same traffic straight to kfake. The proxy's whole cost on the pass-through: with 16 writers
//     the machine's CPU is the limit, so the throughput shows what the proxy's CPU costs; with one,
//     the latency it adds to a round trip.
//   - wire-proxy-64x1 against wire-direct-64x1: share-state Writes (API key 85) over Kafka's protocol
//     to the proxy, which answers them from the persister, against the same Writes to the sidecar's
//     direct mode (a serve.Server on the same persister).
//
// Their clusters, proxies and servers live until the command exits: a scenario has no teardown, and
// an idle one costs no CPU.
var proxyScenarios = []scenario{
	{name: "kafka-direct-16", setup: kafkaRoundTrips(false, 16)},
	{name: "kafka-proxy-16", setup: kafkaRoundTrips(true, 16)},
	{name: "kafka-direct-1", setup: kafkaRoundTrips(false, 1)},
	{name: "kafka-proxy-1", setup: kafkaRoundTrips(true, 1)},
	{name: "wire-direct-64x1", setup: wireWrites(false)},
	{name: "wire-proxy-64x1", setup: wireWrites(true)},
}

// The proxy's targets: at least 0.9 times the baseline's throughput for share-state Writes, and at
// most 1 ms added to the Kafka traffic's p99 latency. Against kfake the Kafka traffic's throughput is
// a reference only: kfake answers in memory, so the proxy's share of a round trip is far larger
// than with a broker that writes a log; the kafka family's proxy part sets that target against real
// brokers.
var proxyTargets = []target{
	{scenario: "kafka-proxy-16", baseline: "kafka-direct-16"},
	{scenario: "kafka-proxy-1", baseline: "kafka-direct-1"},
	{scenario: "wire-proxy-64x1", baseline: "wire-direct-64x1", bound: 0.9},
}

const maxAddedP99Millis = 1.0

// The proxy scenarios run after the others, in the order above, unless -scenarios says otherwise;
// their targets follow the others'.
func init() {
	scenarios = append(scenarios, proxyScenarios...)
	targets = append(targets, proxyTargets...)
}

// The Kafka traffic's shape: round trips of one kafkaRecordBytes record each, over kafkaPartitions
// partitions.
const (
	kafkaTopic       = "bench-events"
	kafkaPartitions  = 6
	kafkaRecordBytes = 1024
)

// kafkaRoundTrips starts a one-broker kfake cluster, behind a proxy when viaProxy, and returns
// writers sharing one kgo client, as a broker's fetchers and a producer share one.
func kafkaRoundTrips(viaProxy bool, writers int) func(context.Context, client.Client, string) ([]writeFunc, error) {
	return func(ctx context.Context, c client.Client, namespace string) ([]writeFunc, error) {
		var addr string
		var err error
		if viaProxy {
			// The proxy serves no share-state request here; it needs a store all the same.
			var p *persister.Persister
			if p, err = persister.New(persister.Options{Client: c, Namespace: namespace, Identity: identity}); err != nil {
				return nil, err
			}
			addr, err = startProxiedKafka(p)
		} else {
			addr, err = startKafka()
		}
		if err != nil {
			return nil, err
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(kafkaTopic), kgo.ProducerLinger(0),
			// Uncompressed: the record's bytes cross the proxy as they are.
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			// Fetch by topic name (v12): the fetch below names no topic ID.
			kgo.MaxVersions(kversion.V3_0_0()))
		if err != nil {
			return nil, err
		}
		value := make([]byte, kafkaRecordBytes)
		write := func(ctx context.Context) error { return produceAndFetch(ctx, cl, value) }
		all := make([]writeFunc, writers)
		for i := range all {
			all[i] = write
		}
		// The first round trip connects and loads the metadata before the clock starts.
		return all, write(ctx)
	}
}

// produceAndFetch produces one record (acks=all) and fetches it back from its partition's leader,
// broker 0, the only one.
func produceAndFetch(ctx context.Context, cl *kgo.Client, value []byte) error {
	rec := &kgo.Record{Value: value}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 1, 1<<20
	topic := kmsg.NewFetchRequestTopic()
	topic.Topic = kafkaTopic
	part := kmsg.NewFetchRequestTopicPartition()
	// One byte: the broker still returns the whole first batch, the one holding the record.
	part.Partition, part.FetchOffset, part.PartitionMaxBytes = rec.Partition, rec.Offset, 1
	topic.Partitions = append(topic.Partitions, part)
	req.Topics = append(req.Topics, topic)
	resp, err := cl.Broker(0).Request(ctx, req)
	if err != nil {
		return fmt.Errorf("fetch: %w", err)
	}
	fetch := resp.(*kmsg.FetchResponse)
	if len(fetch.Topics) != 1 || len(fetch.Topics[0].Partitions) != 1 {
		return fmt.Errorf("fetch: answered %d topics, want one partition of one", len(fetch.Topics))
	}
	p := fetch.Topics[0].Partitions[0]
	if p.ErrorCode != 0 || len(p.RecordBatches) < kafkaRecordBytes {
		return fmt.Errorf("fetch of partition %d at %d: error code %d, %d bytes of batches", rec.Partition, rec.Offset, p.ErrorCode, len(p.RecordBatches))
	}
	return nil
}

// wireWrites sets up the persister-64x1 workload with its Writes sent over Kafka's protocol, to the
// proxy (in front of a kfake broker, as in a broker pod) or to the sidecar's direct-mode server.
func wireWrites(viaProxy bool) func(context.Context, client.Client, string) ([]writeFunc, error) {
	const writersPerPartition = 64
	return func(ctx context.Context, c client.Client, namespace string) ([]writeFunc, error) {
		p, stateEpochs, err := ledPartitions(ctx, c, namespace, 1)
		if err != nil {
			return nil, err
		}
		var addr string
		if viaProxy {
			addr, err = startProxiedKafka(p)
		} else {
			addr, err = startDirectServer(p)
		}
		if err != nil {
			return nil, err
		}
		wire, err := kafkawire.NewClient(kafkawire.ClientOptions{Address: addr})
		if err != nil {
			return nil, err
		}
		cursor := &offsetCursor{}
		writers := make([]writeFunc, writersPerPartition)
		for i := range writers {
			writers[i] = persisterWriter(wire, benchTopic, 0, stateEpochs[0], cursor)
		}
		return writers, nil
	}
}

// startKafka starts a one-broker kfake cluster and returns its address.
func startKafka() (string, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, kafkaTopic))
	if err != nil {
		return "", fmt.Errorf("starting kfake: %w", err)
	}
	return cluster.ListenAddrs()[0], nil
}

// advertisedListener is the broker's real listener naming the proxy's address as its own, so that
// the broker advertises the proxy, as advertised.listeners does.
type advertisedListener struct {
	net.Listener
	proxy net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.proxy }

// startProxiedKafka starts a one-broker kfake cluster behind a proxy answering the share-state
// requests from store, and returns the proxy's address.
func startProxiedKafka(store sharestate.Store) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	var brokerAddr string
	listen := func(network, _ string) (net.Listener, error) {
		if brokerAddr != "" {
			return nil, errors.New("the bench's kfake cluster has one broker")
		}
		real, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		brokerAddr = real.Addr().String()
		return advertisedListener{Listener: real, proxy: ln.Addr()}, nil
	}
	if _, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(kafkaPartitions, kafkaTopic), kfake.ListenFn(listen)); err != nil {
		_ = ln.Close()
		return "", fmt.Errorf("starting kfake: %w", err)
	}
	proxy, err := serve.NewProxy(serve.ProxyOptions{Store: store, Upstream: brokerAddr})
	if err != nil {
		_ = ln.Close()
		return "", err
	}
	go func() { _ = proxy.Serve(ln) }()
	return ln.Addr().String(), nil
}

// startDirectServer starts the sidecar's direct mode, a serve.Server answering from store, and
// returns its address.
func startDirectServer(store sharestate.Store) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv, err := serve.NewServer(serve.ServerOptions{Store: store})
	if err != nil {
		_ = ln.Close()
		return "", err
	}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), nil
}

// addedP99Checks are the proxy's p99 targets: the Kafka traffic's p99 latency through it at most
// maxAddedP99Millis above the direct one, with 16 writers and with one.
func addedP99Checks(byName map[string]Result) []Check {
	return []Check{addedP99Check(byName, "16"), addedP99Check(byName, "1")}
}

func addedP99Check(byName map[string]Result, writers string) Check {
	proxyName, directName := "kafka-proxy-"+writers, "kafka-direct-"+writers
	c := Check{Target: fmt.Sprintf("%s p99 - %s p99 <= %g ms", proxyName, directName, maxAddedP99Millis)}
	proxy, ran := byName[proxyName]
	direct, ranDirect := byName[directName]
	switch {
	case !ran || !ranDirect:
		c.Verdict = "SKIP"
	case !proxy.OK() || !direct.OK():
		c.Verdict = "ERROR"
	default:
		added := proxy.P99Millis - direct.P99Millis
		c.Value = &added
		c.Verdict = verdict(added <= maxAddedP99Millis)
	}
	return c
}
