package kafkawire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// operation is one of the five share-state operations as both ends of the wire see it, the one
// description the client and the server share: its API key; kmsg's request type K and the
// conversions of request and response both ways; the Store method the server calls; and how a
// partition is named in an input P and in a result R.
type operation[K kmsg.Request, P, R any] struct {
	key        int16
	newRequest func() K
	call       func(sharestate.Store, context.Context, sharestate.Request[P]) sharestate.Response[R]

	requestToKmsg    func(sharestate.Request[P]) K
	requestFromKmsg  func(K) sharestate.Request[P]
	responseToKmsg   func(sharestate.Response[R]) kmsg.Response
	responseFromKmsg func(kmsg.Response) sharestate.Response[R]

	inputPart func(P) int32
	// outcome is a result's partition and error; result builds a result that carries only that.
	outcome func(R) sharestate.PartitionResult
	result  func(sharestate.PartitionResult) R
}

func plainResult(r sharestate.PartitionResult) sharestate.PartitionResult { return r }

var initializeOp = operation[*kmsg.InitializeShareGroupStateRequest, sharestate.InitializePartition, sharestate.PartitionResult]{
	key:             KeyInitializeShareGroupState,
	newRequest:      kmsg.NewPtrInitializeShareGroupStateRequest,
	call:            sharestate.Store.Initialize,
	requestToKmsg:   InitializeRequestToKmsg,
	requestFromKmsg: initializeRequestFromKmsg,
	responseToKmsg:  func(r sharestate.InitializeResponse) kmsg.Response { return initializeResponseToKmsg(r) },
	responseFromKmsg: func(k kmsg.Response) sharestate.InitializeResponse {
		return InitializeResponseFromKmsg(k.(*kmsg.InitializeShareGroupStateResponse))
	},
	inputPart: func(p sharestate.InitializePartition) int32 { return p.Partition },
	outcome:   plainResult,
	result:    plainResult,
}

var readOp = operation[*kmsg.ReadShareGroupStateRequest, sharestate.ReadPartition, sharestate.ReadResult]{
	key:             KeyReadShareGroupState,
	newRequest:      kmsg.NewPtrReadShareGroupStateRequest,
	call:            sharestate.Store.Read,
	requestToKmsg:   ReadRequestToKmsg,
	requestFromKmsg: readRequestFromKmsg,
	responseToKmsg:  func(r sharestate.ReadResponse) kmsg.Response { return readResponseToKmsg(r) },
	responseFromKmsg: func(k kmsg.Response) sharestate.ReadResponse {
		return ReadResponseFromKmsg(k.(*kmsg.ReadShareGroupStateResponse))
	},
	inputPart: func(p sharestate.ReadPartition) int32 { return p.Partition },
	outcome:   func(r sharestate.ReadResult) sharestate.PartitionResult { return r.PartitionResult },
	result: func(r sharestate.PartitionResult) sharestate.ReadResult {
		return sharestate.ReadResult{PartitionResult: r, StartOffset: -1}
	},
}

var writeOp = operation[*kmsg.WriteShareGroupStateRequest, sharestate.WritePartition, sharestate.PartitionResult]{
	key:             KeyWriteShareGroupState,
	newRequest:      kmsg.NewPtrWriteShareGroupStateRequest,
	call:            sharestate.Store.Write,
	requestToKmsg:   WriteRequestToKmsg,
	requestFromKmsg: writeRequestFromKmsg,
	responseToKmsg:  func(r sharestate.WriteResponse) kmsg.Response { return writeResponseToKmsg(r) },
	responseFromKmsg: func(k kmsg.Response) sharestate.WriteResponse {
		return WriteResponseFromKmsg(k.(*kmsg.WriteShareGroupStateResponse))
	},
	inputPart: func(p sharestate.WritePartition) int32 { return p.Partition },
	outcome:   plainResult,
	result:    plainResult,
}

var deleteOp = operation[*kmsg.DeleteShareGroupStateRequest, sharestate.DeletePartition, sharestate.PartitionResult]{
	key:             KeyDeleteShareGroupState,
	newRequest:      kmsg.NewPtrDeleteShareGroupStateRequest,
	call:            sharestate.Store.Delete,
	requestToKmsg:   DeleteRequestToKmsg,
	requestFromKmsg: deleteRequestFromKmsg,
	responseToKmsg:  func(r sharestate.DeleteResponse) kmsg.Response { return deleteResponseToKmsg(r) },
	responseFromKmsg: func(k kmsg.Response) sharestate.DeleteResponse {
		return DeleteResponseFromKmsg(k.(*kmsg.DeleteShareGroupStateResponse))
	},
	inputPart: func(p sharestate.DeletePartition) int32 { return p.Partition },
	outcome:   plainResult,
	result:    plainResult,
}

var readSummaryOp = operation[*kmsg.ReadShareGroupStateSummaryRequest, sharestate.ReadSummaryPartition, sharestate.ReadSummaryResult]{
	key:             KeyReadShareGroupStateSummary,
	newRequest:      kmsg.NewPtrReadShareGroupStateSummaryRequest,
	call:            sharestate.Store.ReadSummary,
	requestToKmsg:   ReadSummaryRequestToKmsg,
	requestFromKmsg: readSummaryRequestFromKmsg,
	responseToKmsg:  func(r sharestate.ReadSummaryResponse) kmsg.Response { return readSummaryResponseToKmsg(r) },
	responseFromKmsg: func(k kmsg.Response) sharestate.ReadSummaryResponse {
		return ReadSummaryResponseFromKmsg(k.(*kmsg.ReadShareGroupStateSummaryResponse))
	},
	inputPart: func(p sharestate.ReadSummaryPartition) int32 { return p.Partition },
	outcome:   func(r sharestate.ReadSummaryResult) sharestate.PartitionResult { return r.PartitionResult },
	result: func(r sharestate.PartitionResult) sharestate.ReadSummaryResult {
		return sharestate.ReadSummaryResult{PartitionResult: r, StartOffset: -1, DeliveryCompleteCount: -1}
	},
}

// Handler answers a decoded request through a store. code is the request's outcome for metrics:
// NONE, or the first error a partition was answered with.
type Handler func(ctx context.Context, store sharestate.Store) (resp kmsg.Response, code sharestate.ErrorCode)

// decoder decodes the body of one API's request.
type decoder interface {
	decode(version int16, body []byte) (Handler, error)
}

// serverOps are the operations a server decodes, by API key.
var serverOps = map[int16]decoder{
	KeyInitializeShareGroupState:  initializeOp,
	KeyReadShareGroupState:        readOp,
	KeyWriteShareGroupState:       writeOp,
	KeyDeleteShareGroupState:      deleteOp,
	KeyReadShareGroupStateSummary: readSummaryOp,
}

// DecodeShareState decodes the body of a request of one of the five share-state APIs (API keys
// 83–87), at a version the caller has checked with LookupAPI and Supports. A server decodes a
// request on the connection's reader, so that a malformed request is refused before anything after
// it is read, and calls the Handler later, concurrently with other requests.
func DecodeShareState(key, version int16, body []byte) (Handler, error) {
	op, ok := serverOps[key]
	if !ok {
		return nil, fmt.Errorf("kafkawire: API key %d is not a share-state API", key)
	}
	return op.decode(version, body)
}

func (op operation[K, P, R]) decode(version int16, body []byte) (Handler, error) {
	k := op.newRequest()
	k.SetVersion(version)
	if err := k.ReadFrom(body); err != nil {
		return nil, err
	}
	req := op.requestFromKmsg(k)
	return func(ctx context.Context, store sharestate.Store) (kmsg.Response, sharestate.ErrorCode) {
		out := op.call(store, ctx, req)
		resp := op.responseToKmsg(out)
		resp.SetVersion(version)
		return resp, op.firstError(out)
	}, nil
}

// firstError is a response's outcome for the metrics: the first partition error, or NONE.
func (op operation[K, P, R]) firstError(resp sharestate.Response[R]) sharestate.ErrorCode {
	for _, t := range resp.Topics {
		for _, r := range t.Partitions {
			if c := op.outcome(r).ErrorCode; c != sharestate.ErrNone {
				return c
			}
		}
	}
	return sharestate.ErrNone
}

// Initialize sends InitializeShareGroupState (semantics §2).
func (c *Client) Initialize(ctx context.Context, req sharestate.InitializeRequest) sharestate.InitializeResponse {
	return call(ctx, c, initializeOp, req)
}

// Read sends ReadShareGroupState.
func (c *Client) Read(ctx context.Context, req sharestate.ReadRequest) sharestate.ReadResponse {
	return call(ctx, c, readOp, req)
}

// Write sends WriteShareGroupState, at v1 when the sidecar serves it; at v0 the delivery-complete
// count is not sent and the stored one stays.
func (c *Client) Write(ctx context.Context, req sharestate.WriteRequest) sharestate.WriteResponse {
	return call(ctx, c, writeOp, req)
}

// Delete sends DeleteShareGroupState.
func (c *Client) Delete(ctx context.Context, req sharestate.DeleteRequest) sharestate.DeleteResponse {
	return call(ctx, c, deleteOp, req)
}

// ReadSummary sends ReadShareGroupStateSummary, at v1 when the sidecar serves it; a v0 answer's
// delivery-complete count is -1.
func (c *Client) ReadSummary(ctx context.Context, req sharestate.ReadSummaryRequest) sharestate.ReadSummaryResponse {
	return call(ctx, c, readSummaryOp, req)
}

// call does one operation over the wire and answers every partition of req, in req's order.
func call[K kmsg.Request, P, R any](ctx context.Context, c *Client, op operation[K, P, R], req sharestate.Request[P]) sharestate.Response[R] {
	kresp, err := c.exchange(ctx, op.key, func(version int16) kmsg.Request {
		kreq := op.requestToKmsg(req)
		kreq.SetVersion(version)
		return kreq
	})
	if err != nil {
		return answerAll(op, req, sharestate.PartitionResult{ErrorCode: codeOf(err), ErrorMessage: err.Error()})
	}
	return align(op, req, op.responseFromKmsg(kresp))
}

// answerAll answers every partition of req with the same outcome.
func answerAll[K kmsg.Request, P, R any](op operation[K, P, R], req sharestate.Request[P], outcome sharestate.PartitionResult) sharestate.Response[R] {
	resp := sharestate.Response[R]{Topics: make([]sharestate.TopicData[R], len(req.Topics))}
	for i, t := range req.Topics {
		parts := make([]R, len(t.Partitions))
		for j, p := range t.Partitions {
			o := outcome
			o.Partition = op.inputPart(p)
			parts[j] = op.result(o)
		}
		resp.Topics[i] = sharestate.TopicData[R]{TopicID: t.TopicID, Partitions: parts}
	}
	return resp
}

// align returns resp in req's shape: one answer per requested partition, in the request's order,
// which is what a Store promises. The sidecar answers that way already, and then resp is returned as
// it is; from any other server, answers are matched by topic and partition, and a partition left
// unanswered is an UNKNOWN_SERVER_ERROR rather than a silent gap.
func align[K kmsg.Request, P, R any](op operation[K, P, R], req sharestate.Request[P], resp sharestate.Response[R]) sharestate.Response[R] {
	if sameShape(op, req, resp) {
		return resp
	}
	type key struct {
		topic     sharestate.TopicID
		partition int32
	}
	answers := map[key]R{}
	for _, t := range resp.Topics {
		for _, r := range t.Partitions {
			answers[key{t.TopicID, op.outcome(r).Partition}] = r
		}
	}
	out := sharestate.Response[R]{Topics: make([]sharestate.TopicData[R], len(req.Topics))}
	for i, t := range req.Topics {
		parts := make([]R, len(t.Partitions))
		for j, p := range t.Partitions {
			r, ok := answers[key{t.TopicID, op.inputPart(p)}]
			if !ok {
				r = op.result(sharestate.PartitionResult{Partition: op.inputPart(p), ErrorCode: sharestate.ErrUnknownServerError,
					ErrorMessage: fmt.Sprintf("kafkawire: the response did not answer partition %d of topic %s", op.inputPart(p), t.TopicID)})
			}
			parts[j] = r
		}
		out.Topics[i] = sharestate.TopicData[R]{TopicID: t.TopicID, Partitions: parts}
	}
	return out
}

func sameShape[K kmsg.Request, P, R any](op operation[K, P, R], req sharestate.Request[P], resp sharestate.Response[R]) bool {
	if len(req.Topics) != len(resp.Topics) {
		return false
	}
	for i, t := range req.Topics {
		rt := resp.Topics[i]
		if rt.TopicID != t.TopicID || len(rt.Partitions) != len(t.Partitions) {
			return false
		}
		for j, p := range t.Partitions {
			if op.outcome(rt.Partitions[j]).Partition != op.inputPart(p) {
				return false
			}
		}
	}
	return true
}
