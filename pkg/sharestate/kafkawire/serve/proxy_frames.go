package serve

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// This file holds the only request and response bodies the proxy looks into: the acks of a Produce
// request, and the upstream's ApiVersions response. Everything else is forwarded unread.

// The API keys whose bodies the proxy reads, beyond ApiVersions.
const (
	keyProduce          int16 = 0
	keySASLAuthenticate int16 = 36
)

var errShortProduce = errors.New("a Produce request too short for its acks")

// produceExpectsResponse reports whether a Produce request, given from its request header on (at
// least up to its acks), gets a response: Kafka's brokers answer none at acks=0. The fields before
// acks are the header's (key, version, correlation id, client id; tagged fields from v9, where
// Produce turns flexible) and, from v3, the transactional id (compact from v9).
func produceExpectsResponse(b []byte, version int16) (bool, error) {
	r := kbin.Reader{Src: b}
	r.Int16()
	r.Int16()
	r.Int32()
	r.NullableString()
	flexible := version >= 9
	if flexible {
		kmsg.SkipTags(&r)
	}
	if version >= 3 {
		if flexible {
			r.CompactNullableString()
		} else {
			r.NullableString()
		}
	}
	acks := r.Int16()
	if !r.Ok() {
		return false, errShortProduce
	}
	return acks != 0, nil
}

// Why RewriteAPIVersions returned a response unchanged.
var (
	// errAPIVersionsUndecodable: the response does not decode at the version asked. The client keeps
	// the upstream's ranges for keys 83–87 (or none): the broker may then not send them here.
	errAPIVersionsUndecodable = errors.New("the upstream's ApiVersions response does not decode")
	// errAPIVersionsErrorCode: the response carries an error, as KIP-511's v0 fallback for a version
	// the upstream does not know does: the client retries at a version it knows, and that answer is
	// rewritten.
	errAPIVersionsErrorCode = errors.New("the upstream's ApiVersions response carries an error")
)

// RewriteAPIVersions takes an ApiVersions response frame of the given version, from its correlation
// id on (the header is v0 at every version), and returns it whole, size field included, with the
// share-state APIs' ranges replaced by those of APIs (added if it lists none). A response that does
// not decode at that version, or carries an error, is returned unchanged, with an error saying why:
// forwarding it keeps the broker working, and the caller makes it seen.
func RewriteAPIVersions(frame []byte, version int16) ([]byte, error) {
	unchanged := binary.BigEndian.AppendUint32(make([]byte, 0, len(frame)+4), uint32(len(frame)))
	unchanged = append(unchanged, frame...)
	if len(frame) < 6 {
		return unchanged, fmt.Errorf("%w at v%d: %d bytes, too short for a correlation id and an error code",
			errAPIVersionsUndecodable, version, len(frame))
	}
	// The error code leads the body at every version, the v0 fallback's included, which would not
	// decode at a later version: read first, it tells that answer from a broken one.
	if code := int16(binary.BigEndian.Uint16(frame[4:])); code != 0 {
		return unchanged, fmt.Errorf("%w at v%d: error code %d", errAPIVersionsErrorCode, version, code)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = version
	if err := resp.ReadFrom(frame[4:]); err != nil {
		return unchanged, fmt.Errorf("%w at v%d: %w", errAPIVersionsUndecodable, version, err)
	}
	resp.ApiKeys = slices.DeleteFunc(resp.ApiKeys, func(k kmsg.ApiVersionsResponseApiKey) bool { return isShareStateKey(k.ApiKey) })
	for _, a := range kafkawire.APIs {
		if isShareStateKey(a.Key) {
			resp.ApiKeys = append(resp.ApiKeys, apiKey(a))
		}
	}
	slices.SortStableFunc(resp.ApiKeys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	out := make([]byte, 4, len(frame)+64)
	out = append(out, frame[:4]...)
	out = resp.AppendTo(out)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}
