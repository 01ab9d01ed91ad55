package serve

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// gatedStore is an echoStore whose Writes wait until open is closed, telling entered of each
// partition they hold: a test can keep share-state requests in flight for as long as it needs.
type gatedStore struct {
	*echoStore
	open    chan struct{}
	entered chan int32
}

func newGatedStore() *gatedStore {
	return &gatedStore{echoStore: &echoStore{}, open: make(chan struct{}), entered: make(chan int32, 256)}
}

func (s *gatedStore) Write(ctx context.Context, req sharestate.WriteRequest) sharestate.WriteResponse {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			s.entered <- p.Partition
		}
	}
	select {
	case <-s.open:
	case <-ctx.Done():
	}
	return s.echoStore.Write(ctx, req)
}

// awaitEntered waits until n Writes are held.
func (s *gatedStore) awaitEntered(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-s.entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the share-state requests did not reach the store")
		}
	}
}

// trackingDialer dials the upstream and tells when the proxy closes each connection it made.
type trackingDialer struct {
	mu    sync.Mutex
	conns []*trackedConn
}

type trackedConn struct {
	net.Conn
	once   sync.Once
	closed chan struct{}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (d *trackingDialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, closed: make(chan struct{})}
	d.mu.Lock()
	d.conns = append(d.conns, tc)
	d.mu.Unlock()
	return tc, nil
}

func (d *trackingDialer) dialled() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

// awaitClosed waits until the proxy has closed its i-th upstream connection (from 0): as it does once
// it has seen that connection end.
func (d *trackingDialer) awaitClosed(t *testing.T, i int) {
	t.Helper()
	d.mu.Lock()
	c := d.conns[i]
	d.mu.Unlock()
	select {
	case <-c.closed:
	case <-time.After(30 * time.Second):
		t.Fatalf("the proxy did not close upstream connection %d", i)
	}
}

// brokerAnswer answers as a broker would: ApiVersions with a valid response, the rest with echoBody.
func brokerAnswer(key, version int16, corrID int32, frame []byte) upstreamAnswer {
	if key == kafkawire.KeyAPIVersions {
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = version
		resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 3, MaxVersion: 12}, {ApiKey: 18, MaxVersion: 4}}
		return upstreamAnswer{body: resp.AppendTo(nil)}
	}
	return upstreamAnswer{body: echoBody(corrID, frame)}
}

// apiVersionsFrame is an ApiVersions v3 request, as a Kafka client sends first.
func apiVersionsFrame(corrID int32) []byte {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
	return frameOf(req, 3, corrID)
}

// localWrite is a share-state request the proxy answers itself, for partition corrID.
func localWrite(corrID int32) []byte {
	return frameOf(writeRequest("g", sharestate.WritePartition{Partition: corrID, StateEpoch: 5}), 0, corrID)
}

// readLocalWrite reads the answer to localWrite(corrID), checking it is that request's.
func readLocalWrite(t *testing.T, c net.Conn, corrID int32) {
	t.Helper()
	got, body := wiretest.ReadResponse(t, c, true)
	resp := kmsg.NewPtrWriteShareGroupStateResponse()
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("answer to request %d: %v", corrID, err)
	}
	if p := resp.Topics[0].Partitions[0]; got != corrID || p.Partition != corrID || p.ErrorCode != 5 {
		t.Fatalf("request %d answered with correlation id %d, partition %d, error %d", corrID, got, p.Partition, p.ErrorCode)
	}
}

func send(t *testing.T, c net.Conn, frames ...[]byte) {
	t.Helper()
	var out []byte
	for _, f := range frames {
		out = append(out, f...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
}

// TestProxyKeepsDownstreamWhenIdleUpstreamEnds: a persister's connection, as a stock broker's makes
// it: ApiVersions (forwarded), then share-state requests only (answered here). The upstream ends while
// share-state requests are in flight, and more are sent after: every one is answered, the downstream
// stays open and goes on being answered, and the next forwarded request is answered through a new
// upstream connection.
func TestProxyKeepsDownstreamWhenIdleUpstreamEnds(t *testing.T) {
	store := newGatedStore()
	up := startUpstream(t, brokerAnswer)
	dialer := &trackingDialer{}
	p, addr := startProxy(t, ProxyOptions{Store: store, Upstream: up.ln.Addr().String(), Dial: dialer.dial})
	c := dialRaw(t, addr)
	send(t, c, apiVersionsFrame(0))
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 0 {
		t.Fatalf("ApiVersions answered with correlation id %d", corrID)
	}

	send(t, c, localWrite(1), localWrite(2), localWrite(3), localWrite(4))
	store.awaitEntered(t, 4) // in flight: held by the store
	up.closeAll()            // as a broker's idle timeout does: nothing forwarded is owed
	send(t, c, localWrite(5), localWrite(6), localWrite(7), localWrite(8))
	store.awaitEntered(t, 4)
	close(store.open)
	for i := int32(1); i <= 8; i++ {
		readLocalWrite(t, c, i)
	}
	// The proxy closes its side of the upstream once it has seen the end: what follows comes after.
	dialer.awaitClosed(t, 0)
	for i := int32(9); i <= 20; i++ {
		send(t, c, localWrite(i))
		readLocalWrite(t, c, i)
	}
	if n := dialer.dialled(); n != 1 {
		t.Fatalf("%d upstream connections before a request needed one, want 1: the proxy dials again lazily", n)
	}

	send(t, c, wiretest.RawFrame(3, 12, 21, []byte("metadata")))
	corrID, body := wiretest.ReadResponse(t, c, false)
	if want := "resp-21:\xff\xffmetadata"; corrID != 21 || string(body) != want {
		t.Fatalf("forwarded request answered with correlation id %d, body %q; want 21, %q", corrID, body, want)
	}
	send(t, c, localWrite(22))
	readLocalWrite(t, c, 22)
	if n := dialer.dialled(); n != 2 {
		t.Fatalf("%d upstream connections, want 2", n)
	}
	if n := recorded(p.obs).get("redials"); n != 1 {
		t.Fatalf("%v re-dials counted, want 1", n)
	}
	if n := recorded(p.obs).get("idle_ends"); n != 1 {
		t.Fatalf("%v idle upstream ends counted, want 1", n)
	}
	if n := closedFor(p, closedUpstreamClosed); n != 0 {
		t.Fatalf("%v connections closed for %s, want 0", n, closedUpstreamClosed)
	}
}

// TestProxyClosesWhenUpstreamEndsOwingResponse: an upstream that ends with a forwarded request's
// response owed still closes the pair, the local answers queued before it written first.
func TestProxyClosesWhenUpstreamEndsOwingResponse(t *testing.T) {
	up := startUpstream(t, func(key, version int16, corrID int32, frame []byte) upstreamAnswer {
		if key == 3 {
			return upstreamAnswer{hangUp: true}
		}
		return brokerAnswer(key, version, corrID, frame)
	})
	dialer := &trackingDialer{}
	p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String(), Dial: dialer.dial})
	c := dialRaw(t, addr)
	send(t, c, apiVersionsFrame(0), localWrite(1), wiretest.RawFrame(3, 12, 2, nil))
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 0 {
		t.Fatalf("ApiVersions answered with correlation id %d", corrID)
	}
	readLocalWrite(t, c, 1)
	expectClosed(t, c)
	waitForClosed(t, p, closedUpstreamClosed)
	if n := dialer.dialled(); n != 1 {
		t.Fatalf("%d upstream connections, want 1: nothing is dialled again for a response lost", n)
	}
}

// TestProxyClosesAuthenticatedDownstreamAfterAnswers: when the upstream of a connection that
// authenticated through it (SASL) ends with nothing owed, a new upstream connection would be
// unauthenticated: the share-state answers in flight are written, then the downstream is closed.
func TestProxyClosesAuthenticatedDownstreamAfterAnswers(t *testing.T) {
	store := newGatedStore()
	up := startUpstream(t, func(key, version int16, corrID int32, frame []byte) upstreamAnswer {
		if key == keySASLAuthenticate { // v1: no error, a null message, empty auth bytes
			return upstreamAnswer{body: []byte{0, 0, 0xff, 0xff, 0, 0, 0, 0}}
		}
		return brokerAnswer(key, version, corrID, frame)
	})
	dialer := &trackingDialer{}
	p, addr := startProxy(t, ProxyOptions{Store: store, Upstream: up.ln.Addr().String(), Dial: dialer.dial, RequireAuthentication: true})
	c := dialRaw(t, addr)
	send(t, c, wiretest.RawFrame(keySASLAuthenticate, 1, 1, nil))
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 1 {
		t.Fatalf("SaslAuthenticate answered with correlation id %d", corrID)
	}
	send(t, c, localWrite(2), localWrite(3))
	store.awaitEntered(t, 2)
	up.closeAll()
	close(store.open)
	readLocalWrite(t, c, 2)
	readLocalWrite(t, c, 3)
	expectClosed(t, c)
	waitForClosed(t, p, closedUpstreamAuthenticated)
	if n := dialer.dialled(); n != 1 {
		t.Fatalf("%d upstream connections, want 1", n)
	}
}

// TestProxyRedialFails: after an idle upstream ended, a forwarded request finds the upstream
// unreachable: the answers owed before it are written, then the downstream is closed.
func TestProxyRedialFails(t *testing.T) {
	up := startUpstream(t, brokerAnswer)
	dialer := &trackingDialer{}
	p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String(), Dial: dialer.dial})
	c := dialRaw(t, addr)
	send(t, c, apiVersionsFrame(0))
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 0 {
		t.Fatalf("ApiVersions answered with correlation id %d", corrID)
	}
	_ = up.ln.Close()
	up.closeAll()
	dialer.awaitClosed(t, 0)
	send(t, c, localWrite(1), wiretest.RawFrame(3, 12, 2, nil))
	readLocalWrite(t, c, 1)
	expectClosed(t, c)
	waitForClosed(t, p, closedUpstreamDial)
	if n := recorded(p.obs).get("dial_errors"); n != 1 {
		t.Fatalf("%v upstream dial errors counted, want 1", n)
	}
}

// TestProxyUpstreamEndsBetweenRounds: the upstream ends, with nothing owed, between rounds of
// forwarded and local requests, again and again; each round after an end reaches a new upstream.
func TestProxyUpstreamEndsBetweenRounds(t *testing.T) {
	up := startUpstream(t, brokerAnswer)
	dialer := &trackingDialer{}
	p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String(), Dial: dialer.dial})
	c := dialRaw(t, addr)
	const rounds = 20
	for round := range rounds {
		base := int32(10 * round)
		send(t, c, localWrite(base), wiretest.RawFrame(3, 12, base+1, []byte(fmt.Sprint(round))), localWrite(base+2))
		readLocalWrite(t, c, base)
		if corrID, body := wiretest.ReadResponse(t, c, false); corrID != base+1 || string(body) != fmt.Sprintf("resp-%d:\xff\xff%d", base+1, round) {
			t.Fatalf("round %d: forwarded request answered with correlation id %d, body %q", round, corrID, body)
		}
		readLocalWrite(t, c, base+2)
		up.closeAll()
		dialer.awaitClosed(t, round)
	}
	if n := recorded(p.obs).get("redials"); n != rounds-1 {
		t.Fatalf("%v re-dials counted, want %d", n, rounds-1)
	}
}
