package serve

import (
	"bytes"
	"context"
	"encoding/binary"
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

// upstreamAnswer is what a fakeUpstream does with one request: answer body after delay, or nothing.
type upstreamAnswer struct {
	body   []byte
	delay  time.Duration
	silent bool // no response (Produce at acks=0)
	hangUp bool // close the connection instead
}

// fakeUpstream is a Kafka-protocol peer that answers each connection's requests in order, as a
// broker does, with what answer says, after its delay.
type fakeUpstream struct {
	ln     net.Listener
	answer func(key, version int16, corrID int32, frame []byte) upstreamAnswer

	mu    sync.Mutex
	conns []net.Conn
	keys  []int16 // the keys of the requests received, in order
}

func startUpstream(t *testing.T, answer func(key, version int16, corrID int32, frame []byte) upstreamAnswer) *fakeUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveUpstream(t, ln, answer)
}

// serveUpstream runs a fakeUpstream on ln until the test ends.
func serveUpstream(t *testing.T, ln net.Listener, answer func(key, version int16, corrID int32, frame []byte) upstreamAnswer) *fakeUpstream {
	u := &fakeUpstream{ln: ln, answer: answer}
	t.Cleanup(func() { _ = ln.Close(); u.closeAll() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			go u.serve(c)
		}
	}()
	return u
}

func (u *fakeUpstream) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	for {
		frame, err := kafkawire.ReadFrame(c, 1<<30)
		if err != nil {
			return
		}
		key := int16(binary.BigEndian.Uint16(frame))
		version := int16(binary.BigEndian.Uint16(frame[2:]))
		corrID := int32(binary.BigEndian.Uint32(frame[4:]))
		u.mu.Lock()
		u.keys = append(u.keys, key)
		u.mu.Unlock()
		a := u.answer(key, version, corrID, frame)
		time.Sleep(a.delay)
		switch {
		case a.hangUp:
			return
		case a.silent:
			continue
		}
		resp := binary.BigEndian.AppendUint32(nil, uint32(4+len(a.body)))
		resp = binary.BigEndian.AppendUint32(resp, uint32(corrID))
		resp = append(resp, a.body...)
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

func (u *fakeUpstream) closeAll() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.conns {
		_ = c.Close()
	}
}

func (u *fakeUpstream) receivedKeys() []int16 {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]int16(nil), u.keys...)
}

// startProxy runs a Proxy in front of upstream on a loopback port until the test ends; recorders
// observe it and the requests it answers unless opts names observers.
func startProxy(t *testing.T, opts ProxyOptions) (*Proxy, string) {
	t.Helper()
	if opts.Observer == nil {
		opts.Observer = newRecorder()
	}
	if opts.ServerObserver == nil {
		opts.ServerObserver = newRecorder()
	}
	p, err := NewProxy(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p, serveUntilCleanup(t, p)
}

// echoBody is the fake upstream's answer to a request: its correlation id and every byte after
// the request header's fixed part, so a test can tell which request a response belongs to.
func echoBody(corrID int32, frame []byte) []byte {
	return append([]byte(fmt.Sprintf("resp-%d:", corrID)), frame[8:]...)
}

// TestProxyOrdersLocalAnswersBehindUpstream: a share-state request answered at once by the proxy
// waits behind an earlier request the upstream is slow to answer; a later forwarded request follows
// it. Every response carries its own request's correlation id and body.
func TestProxyOrdersLocalAnswersBehindUpstream(t *testing.T) {
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		delay := time.Duration(0)
		if corrID%3 == 0 {
			delay = 30 * time.Millisecond // every third request is slow upstream
		}
		return upstreamAnswer{body: echoBody(corrID, frame), delay: delay}
	})
	_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	c := dialRaw(t, addr)

	const n = 30
	var out []byte
	for i := range int32(n) {
		if i%3 == 1 { // answered by the proxy, right after a slow upstream request
			out = append(out, frameOf(writeRequest("g", sharestate.WritePartition{Partition: i, StateEpoch: 5}), 0, i)...)
			continue
		}
		out = append(out, wiretest.RawFrame(1, 12, i, []byte(fmt.Sprintf("fetch-%d", i)))...)
	}
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	for i := range int32(n) {
		if i%3 == 1 {
			corrID, body := wiretest.ReadResponse(t, c, true)
			if corrID != i {
				t.Fatalf("response %d has correlation id %d", i, corrID)
			}
			resp := kmsg.NewPtrWriteShareGroupStateResponse()
			if err := resp.ReadFrom(body); err != nil {
				t.Fatal(err)
			}
			if p := resp.Topics[0].Partitions[0]; p.Partition != i || p.ErrorCode != 5 {
				t.Fatalf("response %d answers partition %d with error %d, want partition %d, error 5", i, p.Partition, p.ErrorCode, i)
			}
			continue
		}
		corrID, body := wiretest.ReadResponse(t, c, false)
		want := fmt.Sprintf("resp-%d:\xff\xfffetch-%d", i, i) // the null client id, then the body
		if corrID != i || string(body) != want {
			t.Fatalf("response %d: correlation id %d, body %q; want %d, %q", i, corrID, body, i, want)
		}
	}
	for _, k := range up.receivedKeys() {
		if isShareStateKey(k) {
			t.Fatalf("the upstream received API key %d, which the proxy answers", k)
		}
	}
}

// TestProxyAnswersLocallyWhileUpstreamIdle: with nothing owed, the proxy's writer waits on the
// upstream; a share-state request then arriving, which the upstream will never announce, must wake
// it. One request at a time, each waiting for its answer, alternating with forwarded ones, so that
// every local request finds the writer waiting on an idle upstream.
func TestProxyAnswersLocallyWhileUpstreamIdle(t *testing.T) {
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		return upstreamAnswer{body: echoBody(corrID, frame)}
	})
	_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	c := dialRaw(t, addr)
	for i := range int32(200) {
		local := i%4 != 3
		frame := wiretest.RawFrame(1, 12, i, nil)
		if local {
			frame = frameOf(writeRequest("g", sharestate.WritePartition{Partition: i, StateEpoch: 5}), 0, i)
		}
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		if corrID, _ := wiretest.ReadResponse(t, c, local); corrID != i {
			t.Fatalf("request %d answered with correlation id %d", i, corrID)
		}
	}
}

// TestProxyStreamsLargeResponses: a response larger than every buffer on the way arrives intact,
// between two small ones.
func TestProxyStreamsLargeResponses(t *testing.T) {
	large := bytes.Repeat([]byte("0123456789abcdef"), 1<<18) // 4 MiB
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		if corrID == 2 {
			return upstreamAnswer{body: large}
		}
		return upstreamAnswer{body: echoBody(corrID, frame)}
	})
	_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	c := dialRaw(t, addr)
	for i := int32(1); i <= 3; i++ {
		if _, err := c.Write(wiretest.RawFrame(1, 12, i, nil)); err != nil {
			t.Fatal(err)
		}
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for i := int32(1); i <= 3; i++ {
		frame, err := kafkawire.ReadFrame(c, 8<<20)
		if err != nil {
			t.Fatal(err)
		}
		if got := int32(binary.BigEndian.Uint32(frame)); got != i {
			t.Fatalf("response %d has correlation id %d", i, got)
		}
		if i == 2 && !bytes.Equal(frame[4:], large) {
			t.Fatalf("the large response arrived with %d bytes, not the %d sent, or changed", len(frame)-4, len(large))
		}
	}
}

// TestProxyProduceAcksZero: a Produce at acks=0 gets no response from a broker; the proxy does not
// wait for one, so the request after it is answered.
func TestProxyProduceAcksZero(t *testing.T) {
	up := startUpstream(t, func(key, _ int16, corrID int32, frame []byte) upstreamAnswer {
		if key == keyProduce {
			return upstreamAnswer{silent: true}
		}
		return upstreamAnswer{body: echoBody(corrID, frame)}
	})
	_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	c := dialRaw(t, addr)
	produce := kmsg.NewPtrProduceRequest()
	produce.Acks = 0
	txn := "txn"
	produce.TransactionID = &txn
	var out []byte
	out = append(out, frameOf(produce, 11, 1)...)
	out = append(out, wiretest.RawFrame(3, 1, 2, []byte("metadata"))...)
	out = append(out, frameOf(produce, 7, 3)...)
	out = append(out, frameOf(writeRequest("g", sharestate.WritePartition{Partition: 4}), 0, 4)...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 2 {
		t.Fatalf("first response has correlation id %d, want 2", corrID)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, true); corrID != 4 {
		t.Fatalf("second response has correlation id %d, want 4", corrID)
	}
}

func TestProduceExpectsResponse(t *testing.T) {
	txn := "a-transactional-id"
	for _, version := range []int16{0, 2, 3, 7, 8, 9, 11, 13} {
		for _, acks := range []int16{0, 1, -1} {
			for _, id := range []*string{nil, &txn} {
				req := kmsg.NewPtrProduceRequest()
				req.Acks, req.TransactionID = acks, id
				frame := frameOf(req, version, 7)
				got, err := produceExpectsResponse(frame[4:], version)
				if err != nil || got != (acks != 0) {
					t.Errorf("v%d acks=%d transactional id %v: got %v, %v; want %v", version, acks, id != nil, got, err, acks != 0)
				}
			}
		}
	}
	if _, err := produceExpectsResponse([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0xff, 0xff, 0}, 9); err == nil {
		t.Error("a truncated Produce request was read")
	}
}

// TestProxyRewritesAPIVersions: the upstream's ranges of keys 83–87 are replaced by those served
// here, the rest are kept, and keys 83–87 are added when the upstream lists none.
func TestProxyRewritesAPIVersions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upstream []kmsg.ApiVersionsResponseApiKey
	}{
		{"upstream lists some share-state keys", []kmsg.ApiVersionsResponseApiKey{
			{ApiKey: 0, MinVersion: 3, MaxVersion: 13}, {ApiKey: 18, MinVersion: 0, MaxVersion: 4},
			{ApiKey: 84, MinVersion: 0, MaxVersion: 9}, {ApiKey: 85, MinVersion: 0, MaxVersion: 9}, {ApiKey: 90, MinVersion: 0, MaxVersion: 2},
		}},
		{"upstream lists none", []kmsg.ApiVersionsResponseApiKey{{ApiKey: 1, MinVersion: 4, MaxVersion: 17}, {ApiKey: 18, MinVersion: 0, MaxVersion: 4}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := startUpstream(t, func(_, version int16, _ int32, _ []byte) upstreamAnswer {
				resp := kmsg.NewPtrApiVersionsResponse()
				resp.Version = version
				resp.ApiKeys = tc.upstream
				resp.ThrottleMillis = 17
				return upstreamAnswer{body: resp.AppendTo(nil)}
			})
			_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
			c := dialRaw(t, addr)
			req := kmsg.NewPtrApiVersionsRequest()
			req.ClientSoftwareName, req.ClientSoftwareVersion = "test", "1"
			if _, err := c.Write(frameOf(req, 3, 42)); err != nil {
				t.Fatal(err)
			}
			corrID, body := wiretest.ReadResponse(t, c, false)
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.Version = 3
			if err := resp.ReadFrom(body); err != nil {
				t.Fatal(err)
			}
			want := map[int16][2]int16{}
			for _, k := range tc.upstream {
				if !isShareStateKey(k.ApiKey) {
					want[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
				}
			}
			for _, a := range kafkawire.APIs {
				if isShareStateKey(a.Key) {
					want[a.Key] = [2]int16{a.MinVersion, a.MaxVersion}
				}
			}
			got := map[int16][2]int16{}
			last := int16(-1)
			for _, k := range resp.ApiKeys {
				got[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
				if k.ApiKey <= last {
					t.Errorf("keys out of order: %d after %d", k.ApiKey, last)
				}
				last = k.ApiKey
			}
			if corrID != 42 || resp.ThrottleMillis != 17 || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("correlation id %d, throttle %d, keys %v; want 42, 17, %v", corrID, resp.ThrottleMillis, got, want)
			}
		})
	}
}

// TestProxyClosesWithUpstream: an upstream that closes with a response owed closes the downstream
// connection; an upstream that cannot be reached closes it at once. (One that closes with nothing
// owed does not: proxy_upstream_test.go.)
func TestProxyClosesWithUpstream(t *testing.T) {
	t.Run("with a response owed", func(t *testing.T) {
		up := startUpstream(t, func(int16, int16, int32, []byte) upstreamAnswer { return upstreamAnswer{hangUp: true} })
		p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
		c := dialRaw(t, addr)
		if _, err := c.Write(wiretest.RawFrame(1, 12, 1, nil)); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
		waitForClosed(t, p, closedUpstreamClosed)
	})
	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		gone := ln.Addr().String()
		_ = ln.Close()
		p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: gone})
		c := dialRaw(t, addr)
		expectClosed(t, c)
		if n := recorded(p.obs).get("dial_errors"); n != 1 {
			t.Fatalf("%v upstream dial errors counted, want 1", n)
		}
	})
}

// TestProxyShutdownDrains: a shutdown lets the responses owed leave, the upstream's and the local
// ones, then closes the connection.
func TestProxyShutdownDrains(t *testing.T) {
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		return upstreamAnswer{body: echoBody(corrID, frame), delay: 200 * time.Millisecond}
	})
	p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	c := dialRaw(t, addr)
	out := wiretest.RawFrame(1, 12, 1, nil)
	out = append(out, frameOf(writeRequest("g", sharestate.WritePartition{Partition: 2}), 0, 2)...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // both read by the proxy
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	shutdown := make(chan error, 1)
	go func() { shutdown <- p.Shutdown(ctx) }()
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 1 {
		t.Fatalf("correlation id %d, want 1", corrID)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, true); corrID != 2 {
		t.Fatalf("correlation id %d, want 2", corrID)
	}
	expectClosed(t, c)
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// TestProxySlowUpstreamConnectionAlone: a connection whose upstream is slow to answer holds up only
// itself; another connection's requests are answered meanwhile.
func TestProxySlowUpstreamConnectionAlone(t *testing.T) {
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		delay := time.Duration(0)
		if corrID == 666 {
			delay = 2 * time.Second
		}
		return upstreamAnswer{body: echoBody(corrID, frame), delay: delay}
	})
	_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	slow, fast := dialRaw(t, addr), dialRaw(t, addr)
	if _, err := slow.Write(wiretest.RawFrame(1, 12, 666, nil)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range int32(20) {
		if _, err := fast.Write(wiretest.RawFrame(1, 12, i, nil)); err != nil {
			t.Fatal(err)
		}
		if corrID, _ := wiretest.ReadResponse(t, fast, false); corrID != i {
			t.Fatalf("correlation id %d, want %d", corrID, i)
		}
	}
	if elapsed := time.Since(start); elapsed > time.Second {
		t.Fatalf("the fast connection took %v: held up by the slow one", elapsed)
	}
	if corrID, _ := wiretest.ReadResponse(t, slow, false); corrID != 666 {
		t.Fatalf("correlation id %d, want 666", corrID)
	}
}

// TestProxySurvivesUpstreamRestart: a connection whose upstream goes away with nothing owed stays
// open; once the upstream listens again, that connection's next forwarded request reaches it through
// a new upstream connection, and new connections reach it too.
func TestProxySurvivesUpstreamRestart(t *testing.T) {
	answer := func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		return upstreamAnswer{body: echoBody(corrID, frame)}
	}
	up := startUpstream(t, answer)
	upAddr := up.ln.Addr().String()
	dialer := &trackingDialer{}
	_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: upAddr, Dial: dialer.dial})
	c := dialRaw(t, addr)
	if _, err := c.Write(wiretest.RawFrame(1, 12, 1, nil)); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 1 {
		t.Fatalf("correlation id %d, want 1", corrID)
	}
	_ = up.ln.Close()
	up.closeAll()
	dialer.awaitClosed(t, 0)

	ln, err := net.Listen("tcp", upAddr)
	if err != nil {
		t.Skipf("the upstream's port was taken meanwhile: %v", err)
	}
	serveUpstream(t, ln, answer)
	for i, conn := range []net.Conn{c, dialRaw(t, addr)} {
		corrID := int32(2 + i)
		if _, err := conn.Write(wiretest.RawFrame(1, 12, corrID, nil)); err != nil {
			t.Fatal(err)
		}
		if got, _ := wiretest.ReadResponse(t, conn, false); got != corrID {
			t.Fatalf("after the restart: correlation id %d, want %d", got, corrID)
		}
	}
}

// TestProxyRequireAuthentication: with RequireAuthentication, a share-state request is answered
// only after the upstream accepted a SaslAuthenticate, read at its version's header (v1: none of
// v2's tagged fields).
func TestProxyRequireAuthentication(t *testing.T) {
	for _, tc := range []struct {
		version  int16
		code     int16
		answered bool
	}{{1, 0, true}, {2, 0, true}, {1, 58, false}, {2, 58, false}} {
		t.Run(fmt.Sprintf("v%d error %d", tc.version, tc.code), func(t *testing.T) {
			up := startUpstream(t, func(_, version int16, _ int32, _ []byte) upstreamAnswer {
				var body []byte
				if version >= 2 {
					body = append(body, 0) // the response header's tagged fields
				}
				body = binary.BigEndian.AppendUint16(body, uint16(tc.code))
				return upstreamAnswer{body: append(body, 0xff, 0xff, 0, 0, 0, 0)} // null message, empty bytes
			})
			_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String(), RequireAuthentication: true})
			c := dialRaw(t, addr)
			if _, err := c.Write(wiretest.RawFrame(keySASLAuthenticate, tc.version, 1, nil)); err != nil {
				t.Fatal(err)
			}
			if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 1 {
				t.Fatalf("correlation id %d, want 1", corrID)
			}
			if _, err := c.Write(frameOf(writeRequest("g", sharestate.WritePartition{Partition: 2}), 0, 2)); err != nil {
				t.Fatal(err)
			}
			if !tc.answered {
				expectClosed(t, c)
				return
			}
			if corrID, _ := wiretest.ReadResponse(t, c, true); corrID != 2 {
				t.Fatalf("correlation id %d, want 2", corrID)
			}
		})
	}
}

// TestProxyFrameExact: a WriteShareGroupState v1 request encoded by hand, field by field, as Kafka's
// NetworkClient sends it (request header v2: key, version, correlation id, a client id, no tagged
// fields; a flexible body), pipelined behind a forwarded request, is answered by the proxy with
// exactly the expected bytes (response header v1), after the forwarded request's answer.
func TestProxyFrameExact(t *testing.T) {
	up := startUpstream(t, func(key, _ int16, corrID int32, frame []byte) upstreamAnswer {
		if isShareStateKey(key) {
			t.Errorf("API key %d reached the upstream", key)
		}
		return upstreamAnswer{body: echoBody(corrID, frame), delay: 20 * time.Millisecond}
	})
	_, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	c := dialRaw(t, addr)

	be16 := func(b []byte, v int16) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) }
	be32 := func(b []byte, v int32) []byte { return binary.BigEndian.AppendUint32(b, uint32(v)) }
	be64 := func(b []byte, v int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(v)) }
	req := be16(nil, 85)             // api key: WriteShareGroupState
	req = be16(req, 1)               // api version
	req = be32(req, 0x01020304)      // correlation id
	req = be16(req, 8)               // client id, int16 length even in header v2
	req = append(req, "broker-1"...) //
	req = append(req, 0)             // header tagged fields
	req = append(req, 1+1, 'g')      // group id, compact string
	req = append(req, 1+1)           // topics, compact array of 1
	req = append(req, topicA[:]...)  // topic id
	req = append(req, 1+1)           // partitions, compact array of 1
	req = be32(req, 9)               // partition
	req = be32(req, 4)               // state epoch
	req = be32(req, 2)               // leader epoch
	req = be64(req, 100)             // start offset
	req = be32(req, 77)              // delivery complete count (v1)
	req = append(req, 1+1)           // state batches, compact array of 1
	req = be64(req, 100)             // first offset
	req = be64(req, 109)             // last offset
	req = append(req, 2)             // delivery state
	req = be16(req, 1)               // delivery count
	req = append(req, 0, 0, 0, 0)    // tagged fields: batch, partition, topic, request
	frame := be32(nil, int32(len(req)))
	frame = append(frame, req...)

	out := append(wiretest.RawFrame(1, 12, 0x01020303, []byte("before")), frame...)
	if _, err := c.Write(out); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 0x01020303 {
		t.Fatalf("first response: correlation id %#x, want 0x01020303", corrID)
	}
	message := dccMessage(77, 1)
	want := be32(nil, 0x01020304)     // correlation id
	want = append(want, 0)            // response header tagged fields (v1)
	want = append(want, 1+1)          // results, compact array of 1
	want = append(want, topicA[:]...) // topic id
	want = append(want, 1+1)          // partitions
	want = be32(want, 9)              // partition
	want = be16(want, 4)              // error code: the echoStore answers the state epoch
	want = append(want, byte(len(message)+1))
	want = append(want, message...) // error message, compact nullable string
	want = append(want, 0, 0, 0)    // tagged fields: partition, topic, response
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := kafkawire.ReadFrame(c, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the response is\n%x\nwant\n%x", got, want)
	}
}
