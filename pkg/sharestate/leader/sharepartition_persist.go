package leader

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// This file is how a share-partition leader talks to the persister: one partition per call, retries
// of the retriable codes, and the mapping of the persister's answers to what the leader tells its
// clients (semantics §3, §8).

// PartitionError is why a share-partition operation failed: the code the broker answers its client
// with and, when the persister caused it, the persister's own code.
type PartitionError struct {
	// Code is the error code for the client.
	Code sharestate.ErrorCode
	// Persister is the code the persister answered, or ErrNone when the failure is the leader's own.
	Persister sharestate.ErrorCode
	// Fenced says the share-partition is dead: another leader or a newer state took over (semantics §8).
	Fenced bool
	// Message says what happened.
	Message string
}

func (e *PartitionError) Error() string {
	if e.Persister != sharestate.ErrNone {
		return fmt.Sprintf("%s (persister: %s): %s", e.Code.String(), e.Persister.String(), e.Message)
	}
	return fmt.Sprintf("%s: %s", e.Code.String(), e.Message)
}

func partitionErr(code sharestate.ErrorCode, format string, args ...any) *PartitionError {
	return &PartitionError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// persisterFailure maps a persister's error answer to the leader's outcome (semantics §8): fencing codes
// become NOT_LEADER_OR_FOLLOWER and fence the share-partition; an unknown topic partition or group
// fences it too; the coordinator codes stay (retriable, not fenced); anything else is
// UNKNOWN_SERVER_ERROR.
func persisterFailure(op string, res sharestate.PartitionResult) *PartitionError {
	e := &PartitionError{Persister: res.ErrorCode, Message: fmt.Sprintf("%s: %s", op, res.ErrorMessage)}
	switch code := res.ErrorCode; {
	case code == sharestate.ErrFencedLeaderEpoch || code == sharestate.ErrFencedStateEpoch:
		e.Code, e.Fenced = sharestate.ErrNotLeaderOrFollower, true
	case code == sharestate.ErrUnknownTopicOrPartition || code == sharestate.ErrGroupIDNotFound:
		e.Code, e.Fenced = code, true
	case code.Retriable():
		e.Code = code
	default:
		e.Code = sharestate.ErrUnknownServerError
	}
	return e
}

// RetryPolicy spaces the calls of one persister operation that keeps being answered with a
// retriable code (semantics §3). calls is the number of calls made so far (1 after the first); the
// policy returns how long to wait before the next one, or false to give up and answer the last code.
type RetryPolicy func(calls int) (wait time.Duration, again bool)

// DefaultRetryPolicy is Kafka's broker-side retry: at most 5 calls, waiting about 2, 4, 8 and 16
// seconds (±20 %) between them.
func DefaultRetryPolicy(calls int) (time.Duration, bool) {
	if calls >= 5 {
		return 0, false
	}
	base := time.Second << calls
	return time.Duration(float64(base) * (0.8 + 0.4*rand.Float64())), true
}

// NoRetry gives up after the first call.
func NoRetry(int) (time.Duration, bool) { return 0, false }

// retrying calls call until it answers a code that is not retriable, the policy gives up or ctx
// ends; it returns the last answer.
func retrying[R any](ctx context.Context, policy RetryPolicy, call func() (R, sharestate.ErrorCode)) R {
	for calls := 1; ; calls++ {
		res, code := call()
		if !code.Retriable() {
			return res
		}
		wait, again := policy(calls)
		if !again || !sleep(ctx, wait) {
			return res
		}
	}
}

// sleep waits d; it returns false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// answerOf finds the partition's answer in a one-partition response. A response that does not hold
// it is answered UNKNOWN_SERVER_ERROR.
func answerOf[R any](resp sharestate.Response[R], key SharePartitionKey, part func(R) sharestate.PartitionResult) (R, sharestate.PartitionResult) {
	for _, t := range resp.Topics {
		if t.TopicID != key.TopicID {
			continue
		}
		for _, r := range t.Partitions {
			if pr := part(r); pr.Partition == key.Partition {
				return r, pr
			}
		}
	}
	var zero R
	return zero, sharestate.PartitionResult{Partition: key.Partition, ErrorCode: sharestate.ErrUnknownServerError,
		ErrorMessage: "the persister's response does not answer the partition"}
}

// readState Reads the share-partition's state with the leader epoch, retrying retriable answers.
func (sp *SharePartition) readState(ctx context.Context) (sharestate.ReadResult, *PartitionError) {
	req := sharestate.ReadRequest{GroupID: sp.key.GroupID, Topics: []sharestate.TopicData[sharestate.ReadPartition]{{
		TopicID:    sp.key.TopicID,
		Partitions: []sharestate.ReadPartition{{Partition: sp.key.Partition, LeaderEpoch: sp.leaderEpoch}},
	}}}
	res := retrying(ctx, sp.opts.Retry, func() (sharestate.ReadResult, sharestate.ErrorCode) {
		r, pr := answerOf(sp.store.Read(ctx, req), sp.key, func(r sharestate.ReadResult) sharestate.PartitionResult { return r.PartitionResult })
		r.PartitionResult = pr
		return r, pr.ErrorCode
	})
	if res.ErrorCode != sharestate.ErrNone {
		return res, persisterFailure("read", res.PartitionResult)
	}
	return res, nil
}

// writeState Writes one partition's change, retrying retriable answers.
func (sp *SharePartition) writeState(ctx context.Context, wp sharestate.WritePartition) *PartitionError {
	req := sharestate.WriteRequest{GroupID: sp.key.GroupID, Topics: []sharestate.TopicData[sharestate.WritePartition]{{
		TopicID: sp.key.TopicID, Partitions: []sharestate.WritePartition{wp},
	}}}
	res := retrying(ctx, sp.opts.Retry, func() (sharestate.PartitionResult, sharestate.ErrorCode) {
		_, pr := answerOf(sp.store.Write(ctx, req), sp.key, func(r sharestate.PartitionResult) sharestate.PartitionResult { return r })
		return pr, pr.ErrorCode
	})
	if res.ErrorCode != sharestate.ErrNone {
		return persisterFailure("write", res)
	}
	return nil
}
