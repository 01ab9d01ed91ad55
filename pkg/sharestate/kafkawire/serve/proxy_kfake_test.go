package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// advertisedListener is a broker's real listener that names the proxy in front of it as its
// address, so that the broker advertises the proxy, as advertised.listeners would.
type advertisedListener struct {
	net.Listener
	proxy net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.proxy }

// proxiedCluster is a kfake cluster of n brokers, each fronted by a Proxy and advertising the
// proxy's address.
type proxiedCluster struct {
	addrs     []string    // the proxies', in broker order
	recorders []*recorder // the proxies' observers, in broker order
}

// proxy is the proxies' options: Upstream and Observer are set here.
func startProxiedCluster(t testing.TB, n int, proxy ProxyOptions, opts ...kfake.Opt) *proxiedCluster {
	t.Helper()
	pc := &proxiedCluster{}
	var proxyLns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		proxyLns = append(proxyLns, ln)
		pc.addrs = append(pc.addrs, ln.Addr().String())
	}
	var mu sync.Mutex
	var upstreams []string
	listen := func(network, _ string) (net.Listener, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(upstreams) == n {
			return nil, fmt.Errorf("only %d brokers are fronted", n)
		}
		real, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		upstreams = append(upstreams, real.Addr().String())
		return advertisedListener{Listener: real, proxy: proxyLns[len(upstreams)-1].Addr()}, nil
	}
	cluster, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(n), kfake.ListenFn(listen), kfake.SeedTopics(6, "events")}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	for i, ln := range proxyLns {
		proxy.Upstream, proxy.Observer = upstreams[i], newRecorder()
		pc.recorders = append(pc.recorders, proxy.Observer.(*recorder))
		p, err := NewProxy(proxy)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Serve(ln) }()
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = p.Shutdown(ctx)
			if err := <-done; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v", err)
			}
		})
	}
	return pc
}

// requests is the proxies' count of requests of an API by route, summed over the proxies.
func (pc *proxiedCluster) requests(api, route string) float64 {
	total := 0.0
	for _, r := range pc.recorders {
		total += r.get("route", api, route)
	}
	return total
}

// TestProxyKfakeProduceConsume: 10,000 records produced and consumed exactly once through the
// proxies of a three-broker kfake cluster, while WriteShareGroupState and ReadShareGroupState
// requests go through the same clients' connections and are answered by the proxies, each response
// reaching its own request.
func TestProxyKfakeProduceConsume(t *testing.T) {
	const brokers, records, perClient = 3, 10000, 300
	pc := startProxiedCluster(t, brokers, ProxyOptions{Store: &echoStore{}})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	producer, err := kgo.NewClient(kgo.SeedBrokers(pc.addrs[0]), kgo.DefaultProduceTopic("events"))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	shareStateDone := make(chan error, 1)
	go func() { shareStateDone <- shareStateTraffic(ctx, producer, brokers, perClient) }()

	batch := make([]*kgo.Record, records)
	for i := range batch {
		batch[i] = &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf("value-%d", i))}
	}
	if err := producer.ProduceSync(ctx, batch...).FirstErr(); err != nil {
		t.Fatalf("producing through the proxies: %v", err)
	}
	if err := <-shareStateDone; err != nil {
		t.Fatal(err)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(pc.addrs[1]), kgo.ConsumeTopics("events"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	go func() { shareStateDone <- shareStateTraffic(ctx, consumer, brokers, perClient) }()
	seen := make([]int, records)
	for got := 0; got < records; {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, records, err)
		}
		fetches.EachError(func(topic string, partition int32, err error) { t.Fatalf("fetching %s/%d: %v", topic, partition, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Key))
			if err != nil || string(r.Value) != fmt.Sprintf("value-%d", i) {
				t.Fatalf("record %q=%q is not one produced", r.Key, r.Value)
			}
			seen[i]++
			got++
		})
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("record %d consumed %d times", i, n)
		}
	}
	if err := <-shareStateDone; err != nil {
		t.Fatal(err)
	}
	for _, api := range []string{"Produce", "Fetch", "Metadata", "ApiVersions"} {
		if pc.requests(api, RouteForwarded) == 0 {
			t.Errorf("no %s request was forwarded: the clients bypassed the proxies", api)
		}
	}
	if n := pc.requests("WriteShareGroupState", RouteAnswered) + pc.requests("ReadShareGroupState", RouteAnswered); n != 2*2*perClient {
		t.Errorf("%v share-state requests answered by the proxies, want %d (a Write and a Read, %d times, by 2 clients)", n, 2*2*perClient, perClient)
	}
	if n := pc.requests("WriteShareGroupState", RouteForwarded); n != 0 {
		t.Errorf("%v share-state requests forwarded to kfake", n)
	}
}

// shareStateTraffic sends n WriteShareGroupState and n ReadShareGroupState requests, round robin
// over the brokers, through cl's connections, and checks each answer is its own request's (the
// echoStore's answers are computed from the request).
func shareStateTraffic(ctx context.Context, cl *kgo.Client, brokers, n int) error {
	for i := range n {
		broker := cl.Broker(i % brokers)
		partition, dcc := int32(i), int32(1000+i)
		w := writeRequest("group", sharestate.WritePartition{Partition: partition, DeliveryCompleteCount: dcc})
		w.Version = 1
		resp, err := broker.Request(ctx, w)
		if err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		wp := resp.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0]
		if want := dccMessage(dcc, 0); wp.Partition != partition || wp.ErrorCode != 0 || wp.ErrorMessage == nil || *wp.ErrorMessage != want {
			return fmt.Errorf("write %d answered %+v, want partition %d, message %q", i, wp, partition, want)
		}
		r := kmsg.NewPtrReadShareGroupStateRequest()
		rt := kmsg.NewReadShareGroupStateRequestTopic()
		rt.TopicID = topicA
		rp := kmsg.NewReadShareGroupStateRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch = partition, int32(7*i)
		rt.Partitions = append(rt.Partitions, rp)
		r.GroupID, r.Topics = "group", append(r.Topics, rt)
		resp, err = broker.Request(ctx, r)
		if err != nil {
			return fmt.Errorf("read %d: %w", i, err)
		}
		p := resp.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0]
		if p.Partition != partition || p.StateEpoch != int32(7*i)+1 || p.StartOffset != 10*int64(partition) {
			return fmt.Errorf("read %d answered partition %d, state epoch %d, start offset %d", i, p.Partition, p.StateEpoch, p.StartOffset)
		}
	}
	return nil
}

// TestProxyKfakePipelined: on one raw connection, Metadata (forwarded), share-state requests
// (answered by the proxy) and ApiVersions (forwarded and rewritten) are pipelined without waiting;
// the responses come back in request order, each decoding as its own request's.
func TestProxyKfakePipelined(t *testing.T) {
	pc := startProxiedCluster(t, 1, ProxyOptions{Store: &echoStore{}})
	c := dialRaw(t, pc.addrs[0])
	const rounds = 50
	var out []byte
	corrID := int32(0)
	for i := range rounds {
		md := kmsg.NewPtrMetadataRequest()
		out = append(out, frameOf(md, 12, corrID)...)
		out = append(out, frameOf(writeRequest("g", sharestate.WritePartition{Partition: int32(i), StateEpoch: 3}), 0, corrID+1)...)
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
		out = append(out, frameOf(av, 3, corrID+2)...)
		corrID += 3
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for i := range rounds {
		base := int32(3 * i)
		got, body := wiretest.ReadResponse(t, c, true)
		md := kmsg.NewPtrMetadataResponse()
		md.Version = 12
		if err := md.ReadFrom(body); err != nil || got != base {
			t.Fatalf("round %d: correlation id %d (want %d), metadata: %v", i, got, base, err)
		}
		if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))) != pc.addrs[0] {
			t.Fatalf("the broker advertises %+v, not the proxy %s", md.Brokers, pc.addrs[0])
		}
		got, body = wiretest.ReadResponse(t, c, true)
		w := kmsg.NewPtrWriteShareGroupStateResponse()
		if err := w.ReadFrom(body); err != nil || got != base+1 || w.Topics[0].Partitions[0].Partition != int32(i) || w.Topics[0].Partitions[0].ErrorCode != 3 {
			t.Fatalf("round %d: correlation id %d (want %d), write answer %+v, %v", i, got, base+1, w.Topics, err)
		}
		got, body = wiretest.ReadResponse(t, c, false)
		av := kmsg.NewPtrApiVersionsResponse()
		av.Version = 3
		if err := av.ReadFrom(body); err != nil || got != base+2 {
			t.Fatalf("round %d: correlation id %d (want %d), ApiVersions: %v", i, got, base+2, err)
		}
		if !slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool {
			return k.ApiKey == kafkawire.KeyWriteShareGroupState && k.MaxVersion == 1
		}) || !slices.ContainsFunc(av.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return k.ApiKey == 1 }) {
			t.Fatalf("round %d: ApiVersions lists %+v: not kfake's keys with WriteShareGroupState v0-1", i, av.ApiKeys)
		}
	}
}

// TestProxyKfakeSASL: SASL/PLAIN (SaslHandshake v1, SaslAuthenticate) passes through the proxy to a
// kfake broker that requires it: the right password produces, consumes and reaches the share-state
// answers; a wrong one is refused by the broker.
func TestProxyKfakeSASL(t *testing.T) {
	pc := startProxiedCluster(t, 1, ProxyOptions{Store: &echoStore{}, RequireAuthentication: true},
		kfake.EnableSASL(), kfake.Superuser("PLAIN", "admin", "secret"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := func(pass string, opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(pc.addrs[0]), kgo.DefaultProduceTopic("events"),
			kgo.SASL(plain.Auth{User: "admin", Pass: pass}.AsMechanism()), kgo.RequestRetries(0)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	const records = 100
	good := client("secret", kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i := range records {
		if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("producing with SASL through the proxy: %v", err)
		}
	}
	for got := 0; got < records; {
		fetches := good.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", got, records)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if string(r.Value) != strconv.Itoa(got) {
				t.Fatalf("record %d is %q", got, r.Value)
			}
			got++
		})
	}
	if err := shareStateTraffic(ctx, good, 1, 10); err != nil {
		t.Fatal(err)
	}
	badCtx, badCancel := context.WithTimeout(ctx, 5*time.Second)
	defer badCancel()
	// Without authenticating, a share-state request closes the connection, unanswered.
	raw := dialRaw(t, pc.addrs[0])
	if _, err := raw.Write(frameOf(writeRequest("g", sharestate.WritePartition{Partition: 1}), 0, 1)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, raw)
	if n := pc.requests("WriteShareGroupState", RouteAnswered); n != 10 {
		t.Fatalf("%v Writes answered, want the authenticated client's 10", n)
	}

	// kfake answers a wrong password by closing the connection, with no SaslAuthenticate response
	// (36_sasl_authenticate.go returns an error): the proxy closes the client's connection with it.
	_, err := client("wrong").SeedBrokers()[0].Request(badCtx, kmsg.NewPtrMetadataRequest())
	if !errors.Is(err, io.EOF) {
		t.Fatalf("a wrong password through the proxy: %v, want the connection closed (EOF)", err)
	}
	if pc.requests("SASLAuthenticate", RouteForwarded) < 2 || pc.requests("SASLHandshake", RouteForwarded) < 2 {
		t.Fatalf("SASL went around the proxy: %v handshakes, %v authenticates forwarded",
			pc.requests("SASLHandshake", RouteForwarded), pc.requests("SASLAuthenticate", RouteForwarded))
	}
}

// droppingDialer dials the upstream and can drop every connection it made, as a broker restart does.
type droppingDialer struct {
	mu    sync.Mutex
	conns []net.Conn
}

func (d *droppingDialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err == nil {
		d.mu.Lock()
		d.conns = append(d.conns, c)
		d.mu.Unlock()
	}
	return c, err
}

func (d *droppingDialer) dropAll() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		_ = c.Close()
	}
	n := len(d.conns)
	d.conns = nil
	return n
}

// TestProxyKfakeUpstreamDropped: every upstream connection of the proxies is dropped twice, between
// the batches of a produce run, while share-state requests flow without pause. The clients reconnect through the proxies; the records still arrive exactly once
// (kgo's idempotent producer), kgo never sees a response to the wrong correlation id (it would fail
// the connection), and every share-state answer that arrives is its own request's.
func TestProxyKfakeUpstreamDropped(t *testing.T) {
	const brokers, records = 3, 6000
	dialer := &droppingDialer{}
	pc := startProxiedCluster(t, brokers, ProxyOptions{Store: &echoStore{}, Dial: dialer.dial})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(pc.addrs...), kgo.DefaultProduceTopic("events"),
		kgo.ConsumeTopics("events"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stop := make(chan struct{})
	trafficDone := make(chan error, 1)
	go func() { trafficDone <- shareStateUntil(ctx, cl, brokers, stop) }()

	for part := range 3 {
		batch := make([]*kgo.Record, records/3)
		for i := range batch {
			n := part*len(batch) + i
			batch[i] = &kgo.Record{Key: []byte(strconv.Itoa(n)), Value: []byte(fmt.Sprintf("value-%d", n))}
		}
		if err := cl.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			t.Fatalf("producing part %d: %v", part, err)
		}
		if part < 2 && dialer.dropAll() == 0 {
			t.Fatal("no upstream connection to drop")
		}
	}
	seen := make([]int, records)
	for got := 0; got < records; {
		fetches := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, records, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			i, err := strconv.Atoi(string(r.Key))
			if err != nil || string(r.Value) != fmt.Sprintf("value-%d", i) {
				t.Fatalf("record %q=%q is not one produced", r.Key, r.Value)
			}
			seen[i]++
			got++
		})
	}
	for i, n := range seen {
		if n != 1 {
			t.Fatalf("record %d consumed %d times", i, n)
		}
	}
	close(stop)
	if err := <-trafficDone; err != nil {
		t.Fatal(err)
	}
}

// shareStateUntil sends share-state requests through cl until stop, retrying those whose
// connection broke, and fails on any answer that is not its own request's.
func shareStateUntil(ctx context.Context, cl *kgo.Client, brokers int, stop <-chan struct{}) error {
	answered := 0
	for i := 0; ; i++ {
		select {
		case <-stop:
			if answered == 0 {
				return fmt.Errorf("no share-state request was answered")
			}
			return nil
		default:
		}
		partition, dcc := int32(i), int32(1000+i)
		w := writeRequest("group", sharestate.WritePartition{Partition: partition, DeliveryCompleteCount: dcc})
		w.Version = 1
		resp, err := cl.Broker(i%brokers).Request(ctx, w)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			continue // the connection broke with the upstream's: a new one is dialled
		}
		wp := resp.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0]
		if want := dccMessage(dcc, 0); wp.Partition != partition || wp.ErrorMessage == nil || *wp.ErrorMessage != want {
			return fmt.Errorf("write %d answered %+v, want partition %d, message %q", i, wp, partition, want)
		}
		answered++
	}
}
