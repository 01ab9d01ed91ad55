package kafkawire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file is Kafka's request and response headers, both ways: a server (package serve) parses
// request headers and appends response headers; the client's requests are framed by kmsg's
// RequestFormatter and their responses' headers checked here. Frames themselves are in frame.go.

// RequestHeader is Kafka's request header: v1 (key, version, correlation id, client id), or v2, which
// adds tagged fields, for the flexible versions of an API.
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      *string
}

// ErrShortHeader is ParseRequestHeader's error for a frame too short for its header.
var ErrShortHeader = errors.New("the request is too short for its header")

// ParseRequestHeader reads a request's header and returns the body after it. It reads the fixed part
// first: key, version and correlation id are all a refusal needs. The rest of the header (client id,
// and tagged fields for a flexible header) is read only for a key of APIs, since only then is the
// header's version known; for another key the body is nil.
func ParseRequestHeader(frame []byte) (RequestHeader, []byte, error) {
	var h RequestHeader
	b := kbin.Reader{Src: frame}
	h.Key, h.Version, h.CorrelationID = b.Int16(), b.Int16(), b.Int32()
	if !b.Ok() {
		return h, nil, ErrShortHeader
	}
	if _, known := LookupAPI(h.Key); !known {
		return h, nil, nil
	}
	h.ClientID = b.NullableString()
	if flexibleHeader(h.Key, h.Version) {
		kmsg.SkipTags(&b)
	}
	if !b.Ok() {
		return h, nil, ErrShortHeader
	}
	return h, b.Src, nil
}

// flexibleHeader reports whether a request of this key and version has a v2 header (and its
// response a v1 header). The share-state APIs are flexible from v0; ApiVersions from v3, and so is
// any version of it above what this server knows, as Kafka reads it.
func flexibleHeader(key, version int16) bool {
	if key == KeyAPIVersions {
		return version >= 3
	}
	return true
}

// AppendResponse appends the response frame to the request of header h: size, correlation id, the
// header's tagged fields (none) when flexible, and the body kmsg encodes. ApiVersions' response
// header is always v0, whatever the version, so that a client can read it before it knows which
// versions the server speaks.
func AppendResponse(dst []byte, h RequestHeader, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, h.CorrelationID)
	if h.Key != KeyAPIVersions && flexibleHeader(h.Key, h.Version) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// responseBody checks a response's header (correlation id, then tagged fields when flexible) and
// returns what follows it.
func responseBody(frame []byte, corrID int32, flexible bool) ([]byte, error) {
	b := kbin.Reader{Src: frame}
	got := b.Int32()
	if flexible {
		kmsg.SkipTags(&b)
	}
	if !b.Ok() {
		return nil, errors.New("kafkawire: a response too short for its header")
	}
	if got != corrID {
		return nil, fmt.Errorf("kafkawire: response to correlation id %d where %d was next: the stream is out of order", got, corrID)
	}
	return b.Src, nil
}
