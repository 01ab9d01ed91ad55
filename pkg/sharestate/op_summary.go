package sharestate

import (
	"context"
)

// readSummary is one partition's ReadSummary, read from the API server (never the cache: it writes
// nothing that would check it).
func (p *Persister) readSummary(ctx context.Context, group string, topic TopicID, in ReadSummaryPartition) ReadSummaryResult {
	res := ReadSummaryResult{PartitionResult: PartitionResult{Partition: in.Partition}}
	fail := func(o Outcome) ReadSummaryResult {
		res.ErrorCode, res.ErrorMessage = o.Code, o.Message
		return res
	}
	if o := checkGroup(group); !o.OK() {
		return fail(o)
	}
	if o := CheckKeyInput(topic, in.Partition); !o.OK() {
		return fail(o)
	}
	if o := p.checkKnown(ctx, group, topic, in.Partition); !o.OK() {
		return fail(o)
	}
	key := partitionKey{group: group, topic: topic, partition: in.Partition}
	obj, err := p.getWithRetry(ctx, p.opts.BulkClient, key)
	if err != nil {
		return fail(unavailable(err))
	}
	var stored *State
	if obj != nil && obj.Status.CreateTime != nil {
		// The summary's numbers do not depend on the batches, so a state whose batches are corrupt
		// still has a summary.
		stored = &State{
			StateEpoch: obj.Status.StateEpoch, LeaderEpoch: obj.Status.LeaderEpoch,
			StartOffset: obj.Status.StartOffset, DeliveryCompleteCount: obj.Status.DeliveryCompleteCount,
		}
	}
	summary := SummaryOf(stored)
	summary.Partition = in.Partition
	return summary
}

// checkKnown answers spec §6 for operations that check nothing else first.
func (p *Persister) checkKnown(ctx context.Context, group string, topic TopicID, partition int32) Outcome {
	known, err := p.topology.known(ctx, group, topic, partition)
	if err != nil {
		return unavailable(err)
	}
	if !known {
		return fail(ErrUnknownTopicOrPartition, "partition %d is not declared by the share group", partition)
	}
	return Outcome{}
}
