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
	serve, err := handlers[h.key].decode(h.version, body)
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

// handlers are the five share-state APIs, by key.
var handlers = map[int16]decoder{
	KeyInitializeShareGroupState: shareStateHandler[*kmsg.InitializeShareGroupStateRequest, sharestate.InitializePartition, sharestate.PartitionResult]{
		newRequest: kmsg.NewPtrInitializeShareGroupStateRequest,
		fromKmsg:   InitializeRequestFromKmsg,
		call:       sharestate.Store.Initialize,
		toKmsg:     func(r sharestate.InitializeResponse) kmsg.Response { return InitializeResponseToKmsg(r) },
		outcome:    plainOutcome,
	},
	KeyReadShareGroupState: shareStateHandler[*kmsg.ReadShareGroupStateRequest, sharestate.ReadPartition, sharestate.ReadResult]{
		newRequest: kmsg.NewPtrReadShareGroupStateRequest,
		fromKmsg:   ReadRequestFromKmsg,
		call:       sharestate.Store.Read,
		toKmsg:     func(r sharestate.ReadResponse) kmsg.Response { return ReadResponseToKmsg(r) },
		outcome:    func(r sharestate.ReadResult) sharestate.ErrorCode { return r.ErrorCode },
	},
	KeyWriteShareGroupState: shareStateHandler[*kmsg.WriteShareGroupStateRequest, sharestate.WritePartition, sharestate.PartitionResult]{
		newRequest: kmsg.NewPtrWriteShareGroupStateRequest,
		fromKmsg:   WriteRequestFromKmsg,
		call:       sharestate.Store.Write,
		toKmsg:     func(r sharestate.WriteResponse) kmsg.Response { return WriteResponseToKmsg(r) },
		outcome:    plainOutcome,
	},
	KeyDeleteShareGroupState: shareStateHandler[*kmsg.DeleteShareGroupStateRequest, sharestate.DeletePartition, sharestate.PartitionResult]{
		newRequest: kmsg.NewPtrDeleteShareGroupStateRequest,
		fromKmsg:   DeleteRequestFromKmsg,
		call:       sharestate.Store.Delete,
		toKmsg:     func(r sharestate.DeleteResponse) kmsg.Response { return DeleteResponseToKmsg(r) },
		outcome:    plainOutcome,
	},
	KeyReadShareGroupStateSummary: shareStateHandler[*kmsg.ReadShareGroupStateSummaryRequest, sharestate.ReadSummaryPartition, sharestate.ReadSummaryResult]{
		newRequest: kmsg.NewPtrReadShareGroupStateSummaryRequest,
		fromKmsg:   ReadSummaryRequestFromKmsg,
		call:       sharestate.Store.ReadSummary,
		toKmsg:     func(r sharestate.ReadSummaryResponse) kmsg.Response { return ReadSummaryResponseToKmsg(r) },
		outcome:    func(r sharestate.ReadSummaryResult) sharestate.ErrorCode { return r.ErrorCode },
	},
}

func plainOutcome(r sharestate.PartitionResult) sharestate.ErrorCode { return r.ErrorCode }

// shareStateHandler serves one share-state API: K is kmsg's request type, P and R the operation's
// per-partition input and result.
type shareStateHandler[K kmsg.Request, P, R any] struct {
	newRequest func() K
	fromKmsg   func(K) sharestate.Request[P]
	call       func(sharestate.Store, context.Context, sharestate.Request[P]) sharestate.Response[R]
	toKmsg     func(sharestate.Response[R]) kmsg.Response
	outcome    func(R) sharestate.ErrorCode
}

// decode decodes the body now, on the connection's reader, so that a malformed request is refused
// before anything after it is read; the store is called later, concurrently with other requests.
func (h shareStateHandler[K, P, R]) decode(version int16, body []byte) (serveFunc, error) {
	k := h.newRequest()
	k.SetVersion(version)
	if err := k.ReadFrom(body); err != nil {
		return nil, err
	}
	req := h.fromKmsg(k)
	return func(ctx context.Context, store sharestate.Store) (kmsg.Response, sharestate.ErrorCode) {
		out := h.call(store, ctx, req)
		resp := h.toKmsg(out)
		resp.SetVersion(version)
		return resp, firstError(out, h.outcome)
	}, nil
}

// firstError is a response's outcome for the metrics: the first partition error, or NONE.
func firstError[R any](resp sharestate.Response[R], outcome func(R) sharestate.ErrorCode) sharestate.ErrorCode {
	for _, t := range resp.Topics {
		for _, r := range t.Partitions {
			if c := outcome(r); c != sharestate.ErrNone {
				return c
			}
		}
	}
	return sharestate.ErrNone
}
