package kafkawire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// serveFunc answers a decoded request through the store. code is the request's outcome for the
// metrics: NONE, or the first error a partition was answered with.
type serveFunc func(ctx context.Context, store sharestate.Store) (resp kmsg.Response, code sharestate.ErrorCode)

// request is a request read off a connection and decoded, waiting to be served.
type request struct {
	header requestHeader
	api    string // Kafka's name of the API, for logs and metrics
	serve  serveFunc
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
	h, body, err := parseHeader(frame)
	api := kmsg.NameForKey(h.key)
	if err != nil {
		return request{}, &refusal{reason: closedMalformed, api: api, code: sharestate.ErrInvalidRequest, err: err}
	}
	var serve serveFunc
	if h.key == KeyAPIVersions {
		serve, err = decodeAPIVersions(h.version, body)
	} else {
		serve, err = decodeShareState(h, body)
	}
	if err != nil {
		return request{}, err
	}
	return request{header: h, api: api, serve: serve}, nil
}

// decodeShareState decodes a request of one of the five share-state APIs.
func decodeShareState(h requestHeader, body []byte) (serveFunc, error) {
	api, known := LookupAPI(h.key)
	name := kmsg.NameForKey(h.key)
	if !known || !api.Supports(h.version) {
		return nil, &refusal{reason: closedUnsupport, api: name, code: sharestate.ErrUnsupportedVersion,
			err: fmt.Errorf("API key %d (%s) version %d is not served", h.key, name, h.version)}
	}
	serve, err := serverOps[h.key].decode(h.version, body)
	if err != nil {
		return nil, &refusal{reason: closedMalformed, api: name, code: sharestate.ErrInvalidRequest,
			err: fmt.Errorf("decoding %s v%d: %w", name, h.version, err)}
	}
	return serve, nil
}

// decoder decodes the body of one API's request, at a version the server serves.
type decoder interface {
	decode(version int16, body []byte) (serveFunc, error)
}
