package serve

import (
	"context"
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// Pipelined requests are served concurrently and answered in request order: the first request is
// the slowest, so a server that answered each as soon as it was ready would answer in reverse.
func TestPipelinedRequestsAreAnsweredInOrder(t *testing.T) {
	const n = 20
	store := &echoStore{delay: func(p int32) time.Duration { return time.Duration(n-p) * 15 * time.Millisecond }}
	_, addr := startServer(t, ServerOptions{Store: store})
	c := dialRaw(t, addr)
	var burst []byte
	for i := range n {
		req := writeRequest("g", sharestate.WritePartition{Partition: int32(i), StartOffset: -1, DeliveryCompleteCount: int32(i)})
		burst = append(burst, frameOf(req, 1, int32(1000+i))...)
	}
	start := time.Now()
	if _, err := c.Write(burst); err != nil { // one write: all n requests in flight together
		t.Fatal(err)
	}
	for i := range n {
		corrID, body := wiretest.ReadResponse(t, c, true)
		if corrID != int32(1000+i) {
			t.Fatalf("response %d has correlation id %d, want %d", i, corrID, 1000+i)
		}
		resp := kmsg.WriteShareGroupStateResponse{Version: 1}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		p := resp.Topics[0].Partitions[0]
		if want := dccMessage(int32(i), 0); p.Partition != int32(i) || p.ErrorMessage == nil || *p.ErrorMessage != want {
			t.Fatalf("response %d answers partition %d with %v, want partition %d with %q", i, p.Partition, p.ErrorMessage, i, want)
		}
	}
	// One at a time the requests would take 15ms*(20+19+...+1) = 3.15s; together, the slowest: 300ms.
	if elapsed := time.Since(start); elapsed > 1500*time.Millisecond {
		t.Fatalf("20 pipelined requests took %v: they were not served concurrently", elapsed)
	}
}

func TestAPIVersions(t *testing.T) {
	_, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := dialRaw(t, addr)
	for v := int16(0); v <= 4; v++ {
		req := kmsg.NewPtrApiVersionsRequest()
		req.ClientSoftwareName, req.ClientSoftwareVersion = "test-client", "1.0"
		if _, err := c.Write(frameOf(req, v, int32(v))); err != nil {
			t.Fatal(err)
		}
		corrID, body := wiretest.ReadResponse(t, c, false) // ApiVersions' response header is v0 at every version
		resp := kmsg.ApiVersionsResponse{Version: v}
		if err := resp.ReadFrom(body); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if corrID != int32(v) || resp.ErrorCode != 0 || !sameKeys(resp.ApiKeys, kafkawire.APIs) {
			t.Fatalf("v%d: correlation id %d, error %d, keys %+v", v, corrID, resp.ErrorCode, resp.ApiKeys)
		}
	}
}

func sameKeys(got []kmsg.ApiVersionsResponseApiKey, want []kafkawire.API) bool {
	if len(got) != len(want) {
		return false
	}
	for i, k := range got {
		if k.ApiKey != want[i].Key || k.MinVersion != want[i].MinVersion || k.MaxVersion != want[i].MaxVersion {
			return false
		}
	}
	return true
}

// A version of ApiVersions the server does not know is answered at v0 with UNSUPPORTED_VERSION and
// the versions of ApiVersions it does know (KIP-511); the connection stays open for the retry.
func TestAPIVersionsFallback(t *testing.T) {
	_, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := dialRaw(t, addr)
	// The body of a version from the future is not decoded: garbage after the header is fine.
	if _, err := c.Write(wiretest.RawFrame(kafkawire.KeyAPIVersions, 99, 7, []byte{0, 1, 2, 3, 4, 5})); err != nil {
		t.Fatal(err)
	}
	corrID, body := wiretest.ReadResponse(t, c, false)
	resp := kmsg.ApiVersionsResponse{Version: 0}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if corrID != 7 || resp.ErrorCode != int16(sharestate.ErrUnsupportedVersion) ||
		len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != 18 || resp.ApiKeys[0].MaxVersion != 4 {
		t.Fatalf("fallback answer: correlation id %d, %+v", corrID, resp)
	}
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "test-client", "1.0"
	if _, err := c.Write(frameOf(req, 4, 8)); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 8 {
		t.Fatalf("the retry at v4 got correlation id %d", corrID)
	}
}

// ApiVersions v3+ names the client's software; Kafka refuses a name outside its pattern with
// INVALID_REQUEST, and so does the sidecar.
func TestAPIVersionsRefusesInvalidSoftwareName(t *testing.T) {
	_, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := dialRaw(t, addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "-not valid-", "1"
	if _, err := c.Write(frameOf(req, 3, 1)); err != nil {
		t.Fatal(err)
	}
	_, body := wiretest.ReadResponse(t, c, false)
	resp := kmsg.ApiVersionsResponse{Version: 3}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != int16(sharestate.ErrInvalidRequest) {
		t.Fatalf("error code %d, want INVALID_REQUEST", resp.ErrorCode)
	}
}

// An API key or version the server does not serve closes the connection, as a Kafka broker does,
// after the responses to the requests before it; other connections go on.
func TestUnsupportedRequestsCloseTheirConnection(t *testing.T) {
	srv, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	bystander := dialRaw(t, addr)
	cases := []struct {
		name         string
		key, version int16
	}{
		{"WriteShareGroupState v2", kafkawire.KeyWriteShareGroupState, 2},
		{"InitializeShareGroupState v1", kafkawire.KeyInitializeShareGroupState, 1},
		{"ReadShareGroupState v1", kafkawire.KeyReadShareGroupState, 1},
		{"DeleteShareGroupState v1", kafkawire.KeyDeleteShareGroupState, 1},
		{"ReadShareGroupStateSummary v2", kafkawire.KeyReadShareGroupStateSummary, 2},
		{"negative version", kafkawire.KeyWriteShareGroupState, -1},
		{"Produce, a Kafka API the sidecar does not serve", 0, 9},
		{"an API key Kafka does not have", 1000, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := recorded(srv.obs).get("closed", closedUnsupport)
			c := dialRaw(t, addr)
			good := frameOf(writeRequest("g", sharestate.WritePartition{Partition: 1, StartOffset: -1}), 1, 1)
			bad := wiretest.RawFrame(tc.key, tc.version, 2, []byte{0, 0, 0})
			if _, err := c.Write(append(good, bad...)); err != nil {
				t.Fatal(err)
			}
			if corrID, _ := wiretest.ReadResponse(t, c, true); corrID != 1 {
				t.Fatalf("the request before the refused one got correlation id %d", corrID)
			}
			expectClosed(t, c)
			waitFor(t, "the close to be counted", func() bool {
				return recorded(srv.obs).get("closed", closedUnsupport) == before+1
			})
			expectAPIVersions(t, bystander)
		})
	}
}

// Bytes that are not a request, or a frame above the size limit, close the connection; they never
// harm another connection or make the server allocate what the size field claims.
func TestMalformedFramesCloseTheirConnection(t *testing.T) {
	srv, addr := startServer(t, ServerOptions{Store: &echoStore{}, MaxRequestBytes: 1 << 10})
	bystander := dialRaw(t, addr)
	truncatedWrite := frameOf(writeRequest("g", sharestate.WritePartition{Partition: 1, StateBatches: []sharestate.StateBatch{{LastOffset: 1}}}), 1, 3)
	truncatedWrite = truncatedWrite[:len(truncatedWrite)-5]
	binary.BigEndian.PutUint32(truncatedWrite, uint32(len(truncatedWrite)-4))
	// Header tags, group "g", then 2^30 topics announced in a frame of a few bytes.
	hugeArray := wiretest.RawFrame(kafkawire.KeyWriteShareGroupState, 1, 4, kbin.AppendUvarint([]byte{0, 2, 'g'}, 1<<30))
	cases := []struct {
		name   string
		bytes  []byte
		reason string
	}{
		{"an HTTP request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), closedOversized}, // "GET " is a size of 1.2 GB
		{"a negative size", []byte{0xff, 0xff, 0xff, 0xfe, 1, 2}, closedMalformed},
		{"a size above the maximum, no body sent", binary.BigEndian.AppendUint32(nil, 1<<10+1), closedOversized},
		{"a frame too short for a header", []byte{0, 0, 0, 3, 0, 85, 0}, closedMalformed},
		{"a truncated Write", truncatedWrite, closedMalformed},
		{"an array length beyond the frame", hugeArray, closedMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := recorded(srv.obs).get("closed", tc.reason)
			c := dialRaw(t, addr)
			if _, err := c.Write(tc.bytes); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
			waitFor(t, "the close to be counted as "+tc.reason, func() bool {
				return recorded(srv.obs).get("closed", tc.reason) == before+1
			})
			expectAPIVersions(t, bystander)
		})
	}
}

// expectAPIVersions checks that c still gets answers.
func expectAPIVersions(t *testing.T, c net.Conn) {
	t.Helper()
	if _, err := c.Write(frameOf(kmsg.NewPtrApiVersionsRequest(), 0, 42)); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, false); corrID != 42 {
		t.Fatalf("correlation id %d, want 42", corrID)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An idle connection is closed after the idle timeout; one awaiting a slow answer is not idle.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const idle = 300 * time.Millisecond
	_, addr := startServer(t, ServerOptions{Store: &echoStore{delay: func(int32) time.Duration { return 3 * idle }}, IdleTimeout: idle})
	quiet, busy := dialRaw(t, addr), dialRaw(t, addr)
	start := time.Now()
	if _, err := busy.Write(frameOf(writeRequest("g", sharestate.WritePartition{Partition: 1, StartOffset: -1}), 1, 1)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, quiet)
	if d := time.Since(start); d < idle-50*time.Millisecond || d > 5*idle {
		t.Fatalf("the idle connection closed after %v, want about %v", d, idle)
	}
	if corrID, _ := wiretest.ReadResponse(t, busy, true); corrID != 1 {
		t.Fatalf("correlation id %d", corrID)
	}
	if d := time.Since(start); d < 3*idle {
		t.Fatalf("answered after %v, before the store did", d)
	}
	answered := time.Now()
	expectClosed(t, busy)
	if d := time.Since(answered); d < idle-50*time.Millisecond {
		t.Fatalf("the busy connection closed %v after its answer, before the idle timeout", d)
	}
}

// Shutdown stops reading, answers what was read and only then closes; new connections are refused.
func TestGracefulShutdownDrainsRequestsInFlight(t *testing.T) {
	store := &echoStore{delay: func(int32) time.Duration { return 300 * time.Millisecond }}
	srv, addr := startServer(t, ServerOptions{Store: store})
	c := dialRaw(t, addr)
	if _, err := c.Write(frameOf(writeRequest("g", sharestate.WritePartition{Partition: 3, StartOffset: -1, DeliveryCompleteCount: 9}), 1, 5)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the request to reach the store", func() bool { return store.calls.Load() == 1 })
	shutdown := make(chan error, 1)
	go func() { shutdown <- srv.Shutdown(context.Background()) }()
	corrID, body := wiretest.ReadResponse(t, c, true)
	resp := kmsg.WriteShareGroupStateResponse{Version: 1}
	if err := resp.ReadFrom(body); err != nil || corrID != 5 || *resp.Topics[0].Partitions[0].ErrorMessage != dccMessage(9, 0) {
		t.Fatalf("drained answer: correlation id %d, %+v, %v", corrID, resp, err)
	}
	expectClosed(t, c)
	if err := <-shutdown; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		_ = c.Close()
		t.Fatal("a new connection was accepted after Shutdown")
	}
}

// A shutdown whose deadline passes cancels the requests in flight and closes every connection.
func TestShutdownPastItsDeadline(t *testing.T) {
	store := &echoStore{delay: func(int32) time.Duration { return time.Hour }}
	srv, addr := startServer(t, ServerOptions{Store: store})
	c := dialRaw(t, addr)
	if _, err := c.Write(frameOf(writeRequest("g", sharestate.WritePartition{Partition: 3, StartOffset: -1}), 1, 5)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the request to reach the store", func() bool { return store.calls.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := srv.Shutdown(ctx); err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("Shutdown returned %v, want it cut short", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Shutdown took %v past its deadline of 200ms", d)
	}
	expectClosed(t, c)
}

// A store that panics closes the connection of the request, not the process.
func TestStorePanicClosesOnlyItsConnection(t *testing.T) {
	store := &echoStore{panics: func(p int32) bool { return p == 13 }}
	_, addr := startServer(t, ServerOptions{Store: store})
	bystander, c := dialRaw(t, addr), dialRaw(t, addr)
	if _, err := c.Write(frameOf(writeRequest("g", sharestate.WritePartition{Partition: 13, StartOffset: -1}), 1, 1)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	if _, err := bystander.Write(frameOf(writeRequest("g", sharestate.WritePartition{Partition: 1, StartOffset: -1}), 1, 2)); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, bystander, true); corrID != 2 {
		t.Fatalf("correlation id %d", corrID)
	}
}

// The requests metric counts by API and outcome.
func TestRequestsAreCounted(t *testing.T) {
	srv, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := dialRaw(t, addr)
	fenced := recorded(srv.obs).counter("requests", "WriteShareGroupState", "FENCED_STATE_EPOCH")
	before := fenced()
	req := writeRequest("g", sharestate.WritePartition{Partition: 1, StartOffset: -1},
		sharestate.WritePartition{Partition: 2, StateEpoch: int32(sharestate.ErrFencedStateEpoch), StartOffset: -1})
	if _, err := c.Write(frameOf(req, 0, 1)); err != nil {
		t.Fatal(err)
	}
	wiretest.ReadResponse(t, c, true)
	if got := fenced(); got != before+1 {
		t.Fatalf("FENCED_STATE_EPOCH writes counted %v, want %v", got, before+1)
	}
}

// The store's context ends after RequestTimeout: a request the store cannot finish is still answered,
// with what the store makes of the cancellation (the persister: COORDINATOR_NOT_AVAILABLE).
func TestRequestTimeout(t *testing.T) {
	store := &echoStore{delay: func(int32) time.Duration { return time.Hour }}
	_, addr := startServer(t, ServerOptions{Store: store, RequestTimeout: 100 * time.Millisecond})
	c := dialRaw(t, addr)
	start := time.Now()
	if _, err := c.Write(frameOf(writeRequest("g", sharestate.WritePartition{Partition: 1, StartOffset: -1}), 1, 1)); err != nil {
		t.Fatal(err)
	}
	_, body := wiretest.ReadResponse(t, c, true)
	resp := kmsg.WriteShareGroupStateResponse{Version: 1}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != int16(sharestate.ErrCoordinatorNotAvailable) {
		t.Fatalf("error code %d, want COORDINATOR_NOT_AVAILABLE", code)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("answered after %v with a request timeout of 100ms", d)
	}
}
