package persister

import (
	"context"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// read is one partition's Read: the state as stored, after storing a higher leader epoch and recording
// the broker that sent the Read (caller) as the leader when either changed.
func (p *Persister) read(ctx context.Context, caller callerFunc, group string, topic sharestate.TopicID, in sharestate.ReadPartition) sharestate.ReadResult {
	res := sharestate.ReadResult{PartitionResult: sharestate.PartitionResult{Partition: in.Partition}}
	failWith := func(o sharestate.Outcome) sharestate.ReadResult {
		res.ErrorCode, res.ErrorMessage = o.Code, o.Message
		return res
	}
	if o := sharestate.CheckGroupID(group); !o.OK() {
		return failWith(o)
	}
	if o := sharestate.CheckReadInput(topic, in); !o.OK() {
		return failWith(o)
	}
	id, o := caller()
	if !o.OK() {
		return failWith(o)
	}
	known, err := p.topology.known(ctx, group, topic, in.Partition)
	if err != nil {
		return failWith(unavailable(err))
	}
	key := partitionKey{group: group, topic: topic, partition: in.Partition}
	res, podFenced := p.readAs(ctx, id, key, in, known)
	if podFenced {
		if fresh, ok := p.refreshed(ctx, id); ok {
			res, _ = p.readAs(ctx, fresh, key, in, known)
		}
	}
	return res
}

// readAs is read's update loop, recording id as the leader. podFenced says the answer is the refusal
// of id's pod as the fenced leader (semantics §9).
func (p *Persister) readAs(ctx context.Context, id Identity, key partitionKey, in sharestate.ReadPartition, known bool) (res sharestate.ReadResult, podFenced bool) {
	res = sharestate.ReadResult{PartitionResult: sharestate.PartitionResult{Partition: in.Partition}}
	failWith := func(o sharestate.Outcome) sharestate.ReadResult {
		res.ErrorCode, res.ErrorMessage = o.Code, o.Message
		return res
	}
	var (
		outcome sharestate.Outcome
		state   sharestate.State
	)
	compute := func(obj *sharestatev1.SharePartitionState) (*sharestatev1.SharePartitionState, error) {
		podFenced = false
		stored, err := stateOf(obj)
		if err != nil {
			return nil, err
		}
		if stored != nil {
			if o := fencedPod(obj, id, in.LeaderEpoch); !o.OK() {
				outcome, podFenced = o, true
				return nil, nil
			}
		}
		next, raised, o := sharestate.ApplyRead(stored, in, known)
		outcome, state = o, next
		if !o.OK() || !raised && isLeader(obj, id, in.LeaderEpoch) {
			return nil, nil
		}
		write := obj.DeepCopy()
		write.Status.LeaderEpoch = next.LeaderEpoch
		recordLeader(write, id, in.LeaderEpoch, p.now())
		return write, nil
	}
	s := p.slots.get(key)
	obj, result, err := p.updateLoop(ctx, p.opts.BulkClient, s.key, s.cachedObject(), compute)
	if !loopEnded(result) {
		s.remember(nil)
		return failWith(p.outcomeOf(s.key, result, err)), false
	}
	s.remember(p.labelLeader(ctx, p.opts.BulkClient, s.key, obj))
	if !outcome.OK() {
		return failWith(outcome), podFenced
	}
	res.StateEpoch, res.StartOffset, res.StateBatches = state.StateEpoch, state.StartOffset, state.Batches
	return res, false
}
