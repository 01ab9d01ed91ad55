package serve

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// closedFor reads the proxy's count of connections closed for reason.
func closedFor(p *Proxy, reason string) float64 {
	return recorded(p.obs).get("closed", reason)
}

// waitForClosed waits until the proxy has counted a connection closed for reason: it counts the
// close once the connection's goroutines are done, just after the client sees it.
func waitForClosed(t *testing.T, p *Proxy, reason string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	waitUntil(ctx, t, "a connection closed for "+reason, func() bool { return closedFor(p, reason) >= 1 })
}

// TestProxyClosesIdleConnections: a connection that sends nothing for the idle timeout is closed; one
// awaiting an upstream answer slower than that is not idle, and gets its answer.
func TestProxyClosesIdleConnections(t *testing.T) {
	const idle = 200 * time.Millisecond
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		return upstreamAnswer{body: echoBody(corrID, frame), delay: 4 * idle}
	})
	p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String(), IdleTimeout: idle})
	silent, waiting := dialRaw(t, addr), dialRaw(t, addr)
	if _, err := waiting.Write(wiretest.RawFrame(1, 12, 7, nil)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, silent)
	if corrID, _ := wiretest.ReadResponse(t, waiting, false); corrID != 7 {
		t.Fatalf("correlation id %d, want 7", corrID)
	}
	waitForClosed(t, p, closedIdle)
}

// TestProxyPeerThatStopsReading: a downstream that pipelines requests with large answers and never
// reads them holds the proxy only for the idle timeout: its writes then fail and the pair is closed.
func TestProxyPeerThatStopsReading(t *testing.T) {
	const idle = 200 * time.Millisecond
	large := bytes.Repeat([]byte("x"), 1<<20)
	up := startUpstream(t, func(_, _ int16, _ int32, _ []byte) upstreamAnswer { return upstreamAnswer{body: large} })
	p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String(), IdleTimeout: idle})
	c := dialRaw(t, addr)
	var requests []byte
	for i := range int32(64) { // 64 MiB of answers: more than any socket buffers hold
		requests = append(requests, wiretest.RawFrame(1, 12, i, nil)...)
	}
	if _, err := c.Write(requests); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	waitUntil(ctx, t, "the connection that stopped reading to be closed", func() bool {
		return closedFor(p, closedWriteError) == 1 && recorded(p.obs).get("open") == 0
	})
}

// TestProxyRefusesSASLHandshakeV0: SaslHandshake v0, after which SASL tokens would follow without
// request headers, closes the connection after the responses already owed; the upstream never sees
// it. v1 is forwarded.
func TestProxyRefusesSASLHandshakeV0(t *testing.T) {
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		return upstreamAnswer{body: echoBody(corrID, frame)}
	})
	p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	handshake := kmsg.NewPtrSASLHandshakeRequest()
	handshake.Mechanism = "PLAIN"

	v1 := dialRaw(t, addr)
	if _, err := v1.Write(frameOf(handshake, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, v1, false); corrID != 1 {
		t.Fatalf("SaslHandshake v1: correlation id %d, want 1", corrID)
	}

	v0 := dialRaw(t, addr)
	if _, err := v0.Write(append(wiretest.RawFrame(1, 12, 2, nil), frameOf(handshake, 0, 3)...)); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, v0, false); corrID != 2 {
		t.Fatalf("the Metadata before it: correlation id %d, want 2", corrID)
	}
	expectClosed(t, v0)
	waitForClosed(t, p, closedSASLHandshakeV0)
	if keys := up.receivedKeys(); slices.Equal(keys, []int16{keySASLHandshake, 1}) == false {
		t.Errorf("the upstream received keys %v, want the v1 handshake and the Metadata only", keys)
	}
}

// TestProxyCountsUnsupportedVersions: a share-state request at a version the proxy does not serve
// closes the connection, as a Kafka broker does, and is counted as the sidecar's server counts it:
// by API, with UNSUPPORTED_VERSION.
func TestProxyCountsUnsupportedVersions(t *testing.T) {
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		return upstreamAnswer{body: echoBody(corrID, frame)}
	})
	p, addr := startProxy(t, ProxyOptions{Store: &echoStore{}, Upstream: up.ln.Addr().String()})
	write, _ := kafkawire.LookupAPI(kafkawire.KeyWriteShareGroupState)
	c := dialRaw(t, addr)
	noTaggedFields := []byte{0}
	if _, err := c.Write(wiretest.RawFrame(kafkawire.KeyWriteShareGroupState, write.MaxVersion+1, 7, noTaggedFields)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	waitForClosed(t, p, closedUnsupport)
	counted := recorded(p.local.obs).counter("requests", "WriteShareGroupState", "UNSUPPORTED_VERSION")
	if n := counted(); n != 1 {
		t.Fatalf("WriteShareGroupState answered UNSUPPORTED_VERSION counted %v times, want 1", n)
	}
}
