package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// restartableBroker is a one-broker kfake cluster on a fixed address, advertising the proxy in front
// of it, that can be closed and started again on that address, keeping its data (kfake's DataDir),
// as a broker restart does.
type restartableBroker struct {
	t         *testing.T
	first     net.Listener // the broker's listener at its first start, held since the address was picked
	addr      string       // the broker's own address
	proxyAddr net.Addr
	dataDir   string

	mu      sync.Mutex
	cluster *kfake.Cluster
}

func (b *restartableBroker) start() {
	b.t.Helper()
	listen := func(network, _ string) (net.Listener, error) {
		real, err := b.listen(network)
		if err != nil {
			return nil, err
		}
		return advertisedListener{Listener: real, proxy: b.proxyAddr}, nil
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(listen), kfake.SeedTopics(6, "events"), kfake.DataDir(b.dataDir))
	if err != nil {
		b.t.Fatalf("starting kfake on %s: %v", b.addr, err)
	}
	b.mu.Lock()
	b.cluster = cluster
	b.mu.Unlock()
}

// listen hands out the listener held since the address was picked, at the first start: closing it and
// binding again later let another process take the port in between (a loaded machine's tests did).
// At a restart the address is bound again, and a short-lived socket that took the port during the
// restart's gap is waited out.
func (b *restartableBroker) listen(network string) (net.Listener, error) {
	if l := b.first; l != nil {
		b.first = nil
		return l, nil
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := net.Listen(network, b.addr)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *restartableBroker) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cluster.Close()
}

// TestProxyKfakeUpstreamRestarted: the kfake broker behind a proxy is closed and started again on
// the same address while pipelined raw connections and a kgo client go through the proxy. On every
// raw connection each response carries the correlation id of the oldest request unanswered and
// decodes as that request's response (a Write's answer is its own partition's): none is ever out of
// order or another request's. Connections made after the restart are served, and the kgo client
// goes on producing through it.
func TestProxyKfakeUpstreamRestarted(t *testing.T) {
	first, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := first.Addr().String()
	proxy, err := NewProxy(ProxyOptions{Store: &echoStore{}, Upstream: upstream, Observer: newRecorder()})
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr := serveUntilCleanup(t, proxy)
	resolved, err := net.ResolveTCPAddr("tcp", proxyAddr)
	if err != nil {
		t.Fatal(err)
	}
	broker := &restartableBroker{t: t, first: first, addr: upstream, proxyAddr: resolved, dataDir: t.TempDir()}
	broker.start()
	t.Cleanup(broker.stop)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var restarted atomic.Bool
	var checked, checkedAfter [2]atomic.Int64
	stop := make(chan struct{})
	errs := make(chan error, 3)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() {
			errs <- pipelineChecker(ctx, proxyAddr, stop, func() {
				checked[i].Add(1)
				if restarted.Load() {
					checkedAfter[i].Add(1)
				}
			})
		})
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(proxyAddr), kgo.DefaultProduceTopic("events"), kgo.RequestRetries(100))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var produced, producedAfter atomic.Int64
	wg.Go(func() { errs <- produceUntil(ctx, cl, stop, &produced, &producedAfter, &restarted) })

	waitUntil(ctx, t, "traffic before the restart", func() bool {
		return checked[0].Load() >= 300 && checked[1].Load() >= 300 && produced.Load() >= 50
	})
	broker.stop()
	broker.start()
	restarted.Store(true)
	waitUntil(ctx, t, "traffic after the restart", func() bool {
		return checkedAfter[0].Load() >= 300 && checkedAfter[1].Load() >= 300 && producedAfter.Load() >= 50
	})
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := recorded(proxy.obs).get("closed", closedUpstreamError); n != 0 {
		t.Errorf("%v connections closed for an upstream answer out of order", n)
	}
	// The restart did break connections in use: the checks above covered that moment.
	if n := recorded(proxy.obs).get("closed", closedUpstreamClosed); n == 0 {
		t.Error("no proxied connection was closed by the upstream's restart")
	}
}

// TestCheckResponseCatchesMisdelivery: the restart test's check fails a response to another
// correlation id, or another request's answer under the right one.
func TestCheckResponseCatchesMisdelivery(t *testing.T) {
	resp := kmsg.NewPtrWriteShareGroupStateResponse()
	rt := kmsg.NewWriteShareGroupStateResponseTopic()
	rp := kmsg.NewWriteShareGroupStateResponseTopicPartition()
	rp.Partition = 7
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	frame := append([]byte{0, 0, 0, 4, 0}, resp.AppendTo(nil)...)
	if err := checkResponse(frame, 4, kmsg.NewPtrWriteShareGroupStateResponse(), 7); err != nil {
		t.Fatalf("its own response: %v", err)
	}
	var wrong *wrongResponse
	if err := checkResponse(frame, 5, kmsg.NewPtrWriteShareGroupStateResponse(), 7); !errors.As(err, &wrong) {
		t.Errorf("a response to correlation id 4 where 5 was due: %v", err)
	}
	if err := checkResponse(frame, 4, kmsg.NewPtrWriteShareGroupStateResponse(), 8); !errors.As(err, &wrong) {
		t.Errorf("partition 7's answer to a Write of partition 8: %v", err)
	}
}

// waitUntil polls done until it holds, failing the test if ctx ends first.
func waitUntil(ctx context.Context, t *testing.T, what string, done func() bool) {
	t.Helper()
	for !done() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// pipelineChecker sends rounds of pipelined requests on a raw connection to the proxy (Metadata and
// ApiVersions forwarded, a Write answered by the proxy) and checks every response: the oldest
// request's correlation id, its own request's shape. A connection that breaks (the upstream went
// away) is replaced. It returns the first wrong response, or nil once stop is closed.
func pipelineChecker(ctx context.Context, addr string, stop <-chan struct{}, verified func()) error {
	corrID := int32(0)
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("dialling the proxy: %w", err)
		}
		err = checkRounds(c, &corrID, stop, verified)
		_ = c.Close()
		var wrong *wrongResponse
		if errors.As(err, &wrong) {
			return err
		}
	}
}

// wrongResponse is a response that is not its request's.
type wrongResponse struct{ msg string }

func (e *wrongResponse) Error() string { return e.msg }

// checkRounds runs rounds on one connection until it breaks or stop is closed.
func checkRounds(c net.Conn, corrID *int32, stop <-chan struct{}, verified func()) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		base := *corrID
		*corrID += 3
		partition := base % 1000
		var out []byte
		out = append(out, frameOf(kmsg.NewPtrMetadataRequest(), 12, base)...)
		out = append(out, frameOf(writeRequest("g", sharestate.WritePartition{Partition: partition, StateEpoch: 3}), 0, base+1)...)
		av := kmsg.NewPtrApiVersionsRequest()
		av.ClientSoftwareName, av.ClientSoftwareVersion = "test", "1"
		out = append(out, frameOf(av, 3, base+2)...)
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Write(out); err != nil {
			return err
		}
		for i, want := range []kmsg.Response{kmsg.NewPtrMetadataResponse(), kmsg.NewPtrWriteShareGroupStateResponse(), kmsg.NewPtrApiVersionsResponse()} {
			frame, err := kafkawire.ReadFrame(c, 1<<20)
			if err != nil {
				return err // the connection broke: the responses owed are lost, none is misdelivered
			}
			if err := checkResponse(frame, base+int32(i), want, partition); err != nil {
				return err
			}
			verified()
		}
	}
}

// checkResponse checks one response frame against the request it must answer.
func checkResponse(frame []byte, corrID int32, resp kmsg.Response, partition int32) error {
	got := int32(frame[0])<<24 | int32(frame[1])<<16 | int32(frame[2])<<8 | int32(frame[3])
	if got != corrID {
		return &wrongResponse{fmt.Sprintf("a response to correlation id %d where %d was the oldest unanswered", got, corrID)}
	}
	body := frame[4:]
	switch r := resp.(type) {
	case *kmsg.MetadataResponse:
		r.Version = 12
		body = body[1:] // flexible header: no tagged fields
	case *kmsg.WriteShareGroupStateResponse:
		body = body[1:]
	case *kmsg.ApiVersionsResponse:
		r.Version = 3 // its response header is v0 at every version
	}
	if err := resp.ReadFrom(body); err != nil {
		return &wrongResponse{fmt.Sprintf("correlation id %d: not a %s response: %v", corrID, kmsg.NameForKey(resp.Key()), err)}
	}
	if w, ok := resp.(*kmsg.WriteShareGroupStateResponse); ok {
		if len(w.Topics) != 1 || len(w.Topics[0].Partitions) != 1 || w.Topics[0].Partitions[0].Partition != partition {
			return &wrongResponse{fmt.Sprintf("correlation id %d: a Write answered for %+v, want partition %d", corrID, w.Topics, partition)}
		}
	}
	return nil
}

// produceUntil produces records one by one through cl until stop, counting those acknowledged (and
// those acknowledged after the restart). Errors while the broker is away are expected; kgo's own
// check of correlation ids turning up one is not.
func produceUntil(ctx context.Context, cl *kgo.Client, stop <-chan struct{}, produced, producedAfter *atomic.Int64, restarted *atomic.Bool) error {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		after := restarted.Load()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr()
		cancel()
		switch {
		case err == nil:
			produced.Add(1)
			if after {
				producedAfter.Add(1)
			}
		case ctx.Err() != nil:
			return ctx.Err()
		case strings.Contains(err.Error(), "correlation ID mismatch"): // kgo's errCorrelationIDMismatch (pkg/kgo/errors.go)
			return fmt.Errorf("kgo saw a response out of order: %w", err)
		}
	}
}
