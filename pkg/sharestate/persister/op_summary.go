package persister

import (
	"context"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// readSummary is one partition's ReadSummary, read from the API server (never the cache: it writes
// nothing that would check it).
func (p *Persister) readSummary(ctx context.Context, group string, topic sharestate.TopicID, in sharestate.ReadSummaryPartition) sharestate.ReadSummaryResult {
	res := sharestate.ReadSummaryResult{PartitionResult: sharestate.PartitionResult{Partition: in.Partition}}
	failWith := func(o sharestate.Outcome) sharestate.ReadSummaryResult {
		res.ErrorCode, res.ErrorMessage = o.Code, o.Message
		return res
	}
	if o := sharestate.CheckGroupID(group); !o.OK() {
		return failWith(o)
	}
	if o := sharestate.CheckKeyInput(topic, in.Partition); !o.OK() {
		return failWith(o)
	}
	if o := p.checkKnown(ctx, group, topic, in.Partition); !o.OK() {
		return failWith(o)
	}
	key := partitionKey{group: group, topic: topic, partition: in.Partition}
	obj, err := p.getWithRetry(ctx, p.opts.BulkClient, key)
	if err != nil {
		return failWith(unavailable(err))
	}
	var stored *sharestate.State
	if obj != nil && obj.Status.CreateTime != nil {
		// The summary's numbers do not depend on the batches, so a state whose batches are corrupt
		// still has a summary.
		stored = &sharestate.State{
			StateEpoch: obj.Status.StateEpoch, LeaderEpoch: obj.Status.LeaderEpoch,
			StartOffset: obj.Status.StartOffset, DeliveryCompleteCount: obj.Status.DeliveryCompleteCount,
		}
	}
	summary := sharestate.SummaryOf(stored)
	summary.Partition = in.Partition
	return summary
}

// checkKnown answers semantics §6 for operations that check nothing else first.
func (p *Persister) checkKnown(ctx context.Context, group string, topic sharestate.TopicID, partition int32) sharestate.Outcome {
	known, err := p.topology.known(ctx, group, topic, partition)
	if err != nil {
		return unavailable(err)
	}
	if !known {
		return sharestate.Fail(sharestate.ErrUnknownTopicOrPartition, "partition %d is not declared by the share group", partition)
	}
	return sharestate.Outcome{}
}
