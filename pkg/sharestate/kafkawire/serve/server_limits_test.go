package serve

import (
	"encoding/binary"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// fullWrite is the largest Write frame (v1, correlation id corrID) of at most size bytes made of
// partitions carrying a full window each (2000 state batches, the persister's limit per Write), the
// last one fewer: the largest legitimate requests.
func fullWrite(size int, corrID int32) []byte {
	batches := func(n int) []sharestate.StateBatch {
		b := make([]sharestate.StateBatch, n)
		for i := range b {
			b[i] = sharestate.StateBatch{FirstOffset: int64(2 * i), LastOffset: int64(2 * i), DeliveryState: 2, DeliveryCount: 1}
		}
		return b
	}
	full := func(n int) []sharestate.WritePartition {
		parts := make([]sharestate.WritePartition, n)
		for i := range parts {
			parts[i] = sharestate.WritePartition{Partition: int32(i), StartOffset: -1, StateBatches: batches(2000)}
		}
		return parts
	}
	frame := func(parts []sharestate.WritePartition) []byte { return frameOf(writeRequest("g", parts...), 1, corrID) }
	one, two := len(frame(full(1))), len(frame(full(2)))
	parts := full(max(1, 1+(size-one+two-one-1)/(two-one))) // the fewest full partitions that reach size
	last := &parts[len(parts)-1]
	n := 2000 - (len(frame(parts))-size)/20 // a batch is 20 bytes; the array's length field may shrink too
	for last.StateBatches = batches(n); len(frame(parts)) > size; n-- {
		last.StateBatches = batches(n - 1)
	}
	return frame(parts)
}

// A partition's largest Write is tens of KB: 2000 batches of 20 bytes.
func TestAFullWindowWriteIsTensOfKB(t *testing.T) {
	one := len(fullWrite(40_100, 1))
	if one < 40_000 || one > 41_000 {
		t.Fatalf("a Write of one partition with 2000 batches is %d bytes, want about 40 KB", one)
	}
	if perFrame := kafkawire.DefaultMaxRequestBytes / one; perFrame < 200 {
		t.Fatalf("the default request limit holds %d such partitions, want at least 200", perFrame)
	}
}

// With the default limit, a Write just above it closes its connection, and only that one: the
// server neither reads nor decodes it. One of exactly the limit is answered. (With Kafka's 100 MiB,
// which the sidecar used to take, both were read and decoded.)
func TestARequestAboveTheDefaultLimitClosesOnlyItsConnection(t *testing.T) {
	srv, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	oversized := recorded(srv.obs).counter("closed", closedOversized)
	before := oversized()
	bystander, big := dialRaw(t, addr), dialRaw(t, addr)

	above := fullWrite(kafkawire.DefaultMaxRequestBytes+4+20, 7) // a batch more than the limit holds
	if got := binary.BigEndian.Uint32(above); got <= kafkawire.DefaultMaxRequestBytes {
		t.Fatalf("the oversized frame announces %d bytes", got)
	}
	go func() { _, _ = big.Write(above) }() // the server stops reading after the size field
	expectClosed(t, big)
	waitFor(t, "the close to be counted as oversized", func() bool { return oversized() == before+1 })
	expectAPIVersions(t, bystander)

	atLimit := fullWrite(kafkawire.DefaultMaxRequestBytes+4, 8)
	if n := len(atLimit) - 4; n > kafkawire.DefaultMaxRequestBytes || n <= kafkawire.DefaultMaxRequestBytes-20 {
		t.Fatalf("the request at the limit is %d bytes", n)
	}
	if _, err := bystander.Write(atLimit); err != nil {
		t.Fatal(err)
	}
	corrID, body := wiretest.ReadResponse(t, bystander, true)
	resp := kmsg.WriteShareGroupStateResponse{Version: 1}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if corrID != 8 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) < 200 {
		t.Fatalf("the request of exactly the limit was answered with correlation id %d and %d topics", corrID, len(resp.Topics))
	}
}

// Serving the largest request the default allows (read, decoded, handed to the store, answered)
// allocates a small multiple of its size: its frame is read once, into buffers that grow as its
// bytes arrive, and decoded once.
func TestTheLargestAllowedRequestCostsASmallMultipleOfItsSize(t *testing.T) {
	_, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := dialRaw(t, addr)
	expectAPIVersions(t, c) // the connection's own buffers are allocated by now
	frame := fullWrite(kafkawire.DefaultMaxRequestBytes+4, 9)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, true); corrID != 9 {
		t.Fatalf("correlation id %d, want 9", corrID)
	}
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	// The frame's buffers (under 3×), the decoded message (32 bytes a 20-byte batch: 1.6×) and the
	// store's copy of it (24 bytes a batch: 1.2×); 8× leaves room for what the runtime adds.
	if limit := uint64(8 * len(frame)); allocated > limit {
		t.Fatalf("serving a request of %d bytes allocated %d bytes (%.1f×), over %d", len(frame), allocated, float64(allocated)/float64(len(frame)), limit)
	}
	t.Logf("serving a request of %d bytes allocated %d bytes (%.1f×)", len(frame), allocated, float64(allocated)/float64(len(frame)))
}

// The requests held at once are bounded in bytes over all connections: while two requests that
// fill the budget wait in the store, a third is not read until they are answered.
func TestQueuedRequestBytesAreBounded(t *testing.T) {
	const limit = 64 << 10
	const slow = time.Second
	// Each request's partition 0 waits; calls counts the partitions the store has begun.
	store := &echoStore{delay: func(p int32) time.Duration {
		if p == 0 {
			return slow
		}
		return 0
	}}
	_, addr := startServer(t, ServerOptions{Store: store, MaxRequestBytes: limit, MaxQueuedRequestBytes: 2 * limit})
	a, b, c := dialRaw(t, addr), dialRaw(t, addr), dialRaw(t, addr)
	start := time.Now()
	for i, conn := range []net.Conn{a, b} {
		if _, err := conn.Write(fullWrite(limit+4, int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the first two requests to reach the store", func() bool { return store.calls.Load() == 2 })
	if _, err := c.Write(fullWrite(limit+4, 2)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(slow / 3)
	if n := store.calls.Load(); n != 2 || time.Since(start) >= slow {
		t.Fatalf("the store has begun %d partitions after %v; want 2: the third request must wait for the budget", n, time.Since(start))
	}
	for i, conn := range []net.Conn{a, b, c} {
		if corrID, _ := wiretest.ReadResponse(t, conn, true); corrID != int32(i) {
			t.Fatalf("connection %d: correlation id %d", i, corrID)
		}
	}
	if elapsed := time.Since(start); elapsed < 2*slow {
		t.Fatalf("the third request was answered after %v: it did not wait for the first two", elapsed)
	}
}

// A sender that announces a frame and stops holds the budget only until the frame's bytes are late
// (RequestTimeout here): then its connection closes and the requests waiting behind it are read.
func TestASlowSenderHoldsTheBudgetOnlyUntilItsFrameIsLate(t *testing.T) {
	const limit = 64 << 10
	const late = 300 * time.Millisecond
	_, addr := startServer(t, ServerOptions{Store: &echoStore{}, MaxRequestBytes: limit, MaxQueuedRequestBytes: limit, RequestTimeout: late})
	slowpoke, waiting := dialRaw(t, addr), dialRaw(t, addr)
	if _, err := slowpoke.Write(binary.BigEndian.AppendUint32(nil, limit)); err != nil { // the size field, no bytes
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // the slow sender's reader takes the whole budget
	start := time.Now()
	expectAPIVersions(t, waiting)
	if elapsed := time.Since(start); elapsed < late/2 {
		t.Fatalf("a request was read after %v while the budget was held by an unfinished frame", elapsed)
	}
	expectClosed(t, slowpoke)
}
