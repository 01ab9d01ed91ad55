// Package wiretest holds what tests use to speak Kafka's framing by hand: a request frame with any
// key, version and body, and one response read back. It imports nothing of this module, so that the
// kafkawire package's own tests can use it as well as the sidecar's.
package wiretest

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// maxResponseBytes bounds the size field ReadResponse accepts: a larger one is a broken frame, not a
// response to wait for.
const maxResponseBytes = 1 << 26

// RawFrame is a request frame: its size, a request header (v1: key, version, correlation id, a null
// client id) for any key and version, and body as given.
func RawFrame(key, version int16, corrID int32, body []byte) []byte {
	f := binary.BigEndian.AppendUint32(nil, 0)
	f = binary.BigEndian.AppendUint16(f, uint16(key))
	f = binary.BigEndian.AppendUint16(f, uint16(version))
	f = binary.BigEndian.AppendUint32(f, uint32(corrID))
	f = binary.BigEndian.AppendUint16(f, 0xffff) // null client id
	f = append(f, body...)
	binary.BigEndian.PutUint32(f, uint32(len(f)-4))
	return f
}

// ReadResponse reads one response from c, within 30 s, and returns its correlation id and body.
// flexible says whether its header has tagged fields (every response but ApiVersions'): there must
// be none.
func ReadResponse(t testing.TB, c net.Conn, flexible bool) (int32, []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading a response's size: %v", err)
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > maxResponseBytes {
		t.Fatalf("a response of %d bytes: want 4 to %d", n, maxResponseBytes)
	}
	frame := make([]byte, n)
	if _, err := io.ReadFull(c, frame); err != nil {
		t.Fatalf("reading a response of %d bytes: %v", n, err)
	}
	corrID := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if flexible {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("the response header of correlation id %d has no empty tagged fields: % x", corrID, body[:min(len(body), 8)])
		}
		body = body[1:]
	}
	return corrID, body
}
