package persister

import (
	"context"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// read is one partition's Read: the state as stored, after storing a higher leader epoch and recording
// this persister's broker as the leader when either changed.
func (p *Persister) read(ctx context.Context, group string, topic sharestate.TopicID, in sharestate.ReadPartition) sharestate.ReadResult {
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
	known, err := p.topology.known(ctx, group, topic, in.Partition)
	if err != nil {
		return failWith(unavailable(err))
	}
	var (
		outcome sharestate.Outcome
		state   sharestate.State
	)
	compute := func(obj *sharestatev1.SharePartitionState) (*sharestatev1.SharePartitionState, error) {
		stored, err := stateOf(obj)
		if err != nil {
			return nil, err
		}
		if stored != nil {
			if o := fencedPod(obj, p.opts.Identity, in.LeaderEpoch); !o.OK() {
				outcome = o
				return nil, nil
			}
		}
		next, raised, o := sharestate.ApplyRead(stored, in, known)
		outcome, state = o, next
		if !o.OK() || !raised && p.leaderRecorded(obj, in.LeaderEpoch) {
			return nil, nil
		}
		write := obj.DeepCopy()
		write.Status.LeaderEpoch = next.LeaderEpoch
		recordLeader(write, p.opts.Identity, in.LeaderEpoch, p.now())
		return write, nil
	}
	s := p.slots.get(partitionKey{group: group, topic: topic, partition: in.Partition})
	obj, result, err := p.updateLoop(ctx, p.opts.BulkClient, s.key, s.cachedObject(), compute)
	if !loopEnded(result) {
		s.remember(nil)
		return failWith(p.outcomeOf(s.key, result, err))
	}
	s.remember(obj)
	if !outcome.OK() {
		return failWith(outcome)
	}
	res.StateEpoch, res.StartOffset, res.StateBatches = state.StateEpoch, state.StartOffset, state.Batches
	return res
}
