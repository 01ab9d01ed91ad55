package serve

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// request is a request read off a connection and decoded, waiting to be served.
type request struct {
	header kafkawire.RequestHeader
	api    string // Kafka's name of the API, for logs and metrics
	serve  kafkawire.Handler
}

// Why a connection is closed: the values of the connections_closed_total metric's reason label.
const (
	closedByPeer     = "peer_closed"
	closedIdle       = "idle"
	closedShutdown   = "shutdown"
	closedOversized  = "oversized_request"
	closedMalformed  = "malformed_request"
	closedUnsupport  = "unsupported_request"
	closedReadError  = "read_error"
	closedWriteError = "write_error"
	closedPanic      = "internal_error"
)

// refusal is a request the server does not answer. As a Kafka broker does, it closes the connection:
// there is no response layout to answer an API or a version it does not know, and a request it
// cannot decode leaves the stream untrustworthy.
type refusal struct {
	reason string               // the connection-closed reason
	api    string               // Kafka's name of the API, "Unknown" if none
	code   sharestate.ErrorCode // the requests metric's error label
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }

// decode parses a request frame; it returns a refusal for anything the server does not answer.
func decode(frame []byte) (request, error) {
	h, body, err := kafkawire.ParseRequestHeader(frame)
	api := kmsg.NameForKey(h.Key)
	if err != nil {
		return request{}, &refusal{reason: closedMalformed, api: api, code: sharestate.ErrInvalidRequest, err: err}
	}
	var serve kafkawire.Handler
	if h.Key == kafkawire.KeyAPIVersions {
		serve, err = decodeAPIVersions(h.Version, body)
	} else {
		serve, err = decodeRequest(h, body)
	}
	if err != nil {
		return request{}, err
	}
	return request{header: h, api: api, serve: serve}, nil
}

// decodeShareState decodes the body of a share-state request: kafkawire's, or a test's stand-in.
var decodeShareState = kafkawire.DecodeShareState

// decodeRequest decodes a request of one of the five share-state APIs.
func decodeRequest(h kafkawire.RequestHeader, body []byte) (kafkawire.Handler, error) {
	api, known := kafkawire.LookupAPI(h.Key)
	name := kmsg.NameForKey(h.Key)
	if !known || !api.Supports(h.Version) {
		return nil, &refusal{reason: closedUnsupport, api: name, code: sharestate.ErrUnsupportedVersion,
			err: fmt.Errorf("API key %d (%s) version %d is not served", h.Key, name, h.Version)}
	}
	serve, err := decodeShareState(h.Key, h.Version, body)
	if err != nil {
		return nil, &refusal{reason: closedMalformed, api: name, code: sharestate.ErrInvalidRequest,
			err: fmt.Errorf("decoding %s v%d: %w", name, h.Version, err)}
	}
	return serve, nil
}
