package kafkawire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// operation describes one of the five operations to the client's generic call path: its API key and
// how to convert its request and response, and to name the partition of an input or a result.
type operation[P, R any] struct {
	key       int16
	encode    func(sharestate.Request[P]) kmsg.Request
	decode    func(kmsg.Response) sharestate.Response[R]
	inputPart func(P) int32
	// result builds a partition's answer that carries only an outcome.
	result     func(sharestate.PartitionResult) R
	resultPart func(R) int32
}

func plainResult(r sharestate.PartitionResult) sharestate.PartitionResult { return r }
func plainPart(r sharestate.PartitionResult) int32                        { return r.Partition }

var initializeOp = operation[sharestate.InitializePartition, sharestate.PartitionResult]{
	key:    KeyInitializeShareGroupState,
	encode: func(r sharestate.InitializeRequest) kmsg.Request { return InitializeRequestToKmsg(r) },
	decode: func(k kmsg.Response) sharestate.InitializeResponse {
		return InitializeResponseFromKmsg(k.(*kmsg.InitializeShareGroupStateResponse))
	},
	inputPart:  func(p sharestate.InitializePartition) int32 { return p.Partition },
	result:     plainResult,
	resultPart: plainPart,
}

var readOp = operation[sharestate.ReadPartition, sharestate.ReadResult]{
	key:    KeyReadShareGroupState,
	encode: func(r sharestate.ReadRequest) kmsg.Request { return ReadRequestToKmsg(r) },
	decode: func(k kmsg.Response) sharestate.ReadResponse {
		return ReadResponseFromKmsg(k.(*kmsg.ReadShareGroupStateResponse))
	},
	inputPart: func(p sharestate.ReadPartition) int32 { return p.Partition },
	result: func(r sharestate.PartitionResult) sharestate.ReadResult {
		return sharestate.ReadResult{PartitionResult: r, StartOffset: -1}
	},
	resultPart: func(r sharestate.ReadResult) int32 { return r.Partition },
}

var writeOp = operation[sharestate.WritePartition, sharestate.PartitionResult]{
	key:    KeyWriteShareGroupState,
	encode: func(r sharestate.WriteRequest) kmsg.Request { return WriteRequestToKmsg(r) },
	decode: func(k kmsg.Response) sharestate.WriteResponse {
		return WriteResponseFromKmsg(k.(*kmsg.WriteShareGroupStateResponse))
	},
	inputPart:  func(p sharestate.WritePartition) int32 { return p.Partition },
	result:     plainResult,
	resultPart: plainPart,
}

var deleteOp = operation[sharestate.DeletePartition, sharestate.PartitionResult]{
	key:    KeyDeleteShareGroupState,
	encode: func(r sharestate.DeleteRequest) kmsg.Request { return DeleteRequestToKmsg(r) },
	decode: func(k kmsg.Response) sharestate.DeleteResponse {
		return DeleteResponseFromKmsg(k.(*kmsg.DeleteShareGroupStateResponse))
	},
	inputPart:  func(p sharestate.DeletePartition) int32 { return p.Partition },
	result:     plainResult,
	resultPart: plainPart,
}

var readSummaryOp = operation[sharestate.ReadSummaryPartition, sharestate.ReadSummaryResult]{
	key:    KeyReadShareGroupStateSummary,
	encode: func(r sharestate.ReadSummaryRequest) kmsg.Request { return ReadSummaryRequestToKmsg(r) },
	decode: func(k kmsg.Response) sharestate.ReadSummaryResponse {
		return ReadSummaryResponseFromKmsg(k.(*kmsg.ReadShareGroupStateSummaryResponse))
	},
	inputPart: func(p sharestate.ReadSummaryPartition) int32 { return p.Partition },
	result: func(r sharestate.PartitionResult) sharestate.ReadSummaryResult {
		return sharestate.ReadSummaryResult{PartitionResult: r, StartOffset: -1, DeliveryCompleteCount: -1}
	},
	resultPart: func(r sharestate.ReadSummaryResult) int32 { return r.Partition },
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
func call[P, R any](ctx context.Context, c *Client, op operation[P, R], req sharestate.Request[P]) sharestate.Response[R] {
	kresp, err := c.exchange(ctx, op.key, func(version int16) kmsg.Request {
		kreq := op.encode(req)
		kreq.SetVersion(version)
		return kreq
	})
	if err != nil {
		return answerAll(op, req, sharestate.PartitionResult{ErrorCode: codeOf(err), ErrorMessage: err.Error()})
	}
	return align(op, req, op.decode(kresp))
}

// answerAll answers every partition of req with the same outcome.
func answerAll[P, R any](op operation[P, R], req sharestate.Request[P], outcome sharestate.PartitionResult) sharestate.Response[R] {
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
func align[P, R any](op operation[P, R], req sharestate.Request[P], resp sharestate.Response[R]) sharestate.Response[R] {
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
			answers[key{t.TopicID, op.resultPart(r)}] = r
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

func sameShape[P, R any](op operation[P, R], req sharestate.Request[P], resp sharestate.Response[R]) bool {
	if len(req.Topics) != len(resp.Topics) {
		return false
	}
	for i, t := range req.Topics {
		rt := resp.Topics[i]
		if rt.TopicID != t.TopicID || len(rt.Partitions) != len(t.Partitions) {
			return false
		}
		for j, p := range t.Partitions {
			if op.resultPart(rt.Partitions[j]) != op.inputPart(p) {
				return false
			}
		}
	}
	return true
}
