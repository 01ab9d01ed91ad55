package persister

import (
	"context"
	"fmt"
	"runtime/debug"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// write validates one partition's Write and queues it behind the partition's update in flight, if
// any; the first writer of a burst starts the slot's committer. There is no linger: an idle
// partition's write goes out at once. The write records the broker that sent it (caller) as leader.
func (p *Persister) write(ctx context.Context, caller callerFunc, group string, topic sharestate.TopicID, in sharestate.WritePartition) sharestate.Outcome {
	if o := sharestate.CheckGroupID(group); !o.OK() {
		return o
	}
	if o := sharestate.CheckWriteInput(topic, in, p.opts.Limits); !o.OK() {
		return o
	}
	id, o := caller()
	if !o.OK() {
		return o
	}
	known, err := p.topology.known(ctx, group, topic, in.Partition)
	if err != nil {
		return unavailable(err)
	}
	s := p.slots.get(partitionKey{group: group, topic: topic, partition: in.Partition})
	w := &pendingWrite{req: in, known: known, id: id, done: make(chan sharestate.Outcome, 1)}
	o = p.queueWrite(ctx, s, w)
	// o first: w.podFenced is the committer's to write until it answers, and a caller whose time ran
	// out has no answer.
	if o.Code == sharestate.ErrFencedLeaderEpoch && w.podFenced {
		// Refused as the fenced pod: a refused write changed nothing, so it may go again as the pod
		// a fresh look-up finds, if that is another.
		if fresh, ok := p.refreshed(ctx, id); ok {
			o = p.queueWrite(ctx, s, &pendingWrite{req: in, known: known, id: fresh, done: make(chan sharestate.Outcome, 1)})
		}
	}
	return o
}

// queueWrite queues w in s, commits the first round itself when no committer runs, and waits for
// w's answer.
func (p *Persister) queueWrite(ctx context.Context, s *slot, w *pendingWrite) sharestate.Outcome {
	queued, start := s.enqueue(w, p.opts.MaxPendingWrites)
	if !queued {
		return sharestate.Fail(sharestate.ErrCoordinatorLoadInProgress, "%d writes are already queued for partition %d", p.opts.MaxPendingWrites, w.req.Partition)
	}
	if start {
		// The first writer of a burst commits the first round itself: an idle partition's write
		// costs no handoff to another goroutine. Writes that queued meanwhile go on in the background.
		p.commitRound(s)
		if more := s.take(p.opts.MaxWritesPerUpdate); more != nil {
			go func() {
				p.commit(s, more)
				p.commitLoop(s)
			}()
		}
	}
	select {
	case o := <-w.done:
		return o
	case <-ctx.Done():
		// The operation's time is up, perhaps spent queued behind a stalled update. The write may
		// still be applied: the caller only stops waiting, and is told it is unknown.
		return unavailable(ctx.Err())
	}
}

// commitLoop commits the slot's queue, one status update per round, until the queue is empty.
func (p *Persister) commitLoop(s *slot) {
	for p.commitRound(s) {
	}
}

// commitRound commits what is queued, up to MaxWritesPerUpdate writes; false when nothing was (and
// the slot's committer is then done).
func (p *Persister) commitRound(s *slot) bool {
	ops := s.take(p.opts.MaxWritesPerUpdate)
	if ops == nil {
		return false
	}
	p.commit(s, ops)
	return true
}

// commit stores ops in one status update and answers each of them.
func (p *Persister) commit(s *slot, ops []*pendingWrite) {
	p.obs.WritesCombined(len(ops))
	for i, o := range p.commitWritesRecovering(s, ops) {
		ops[i].done <- o
	}
}

// commitWritesRecovering is commitWrites, with a panic (a bug) answered UNKNOWN_SERVER_ERROR to every
// write of the round and the cached object forgotten: the committer may run on a goroutine of its own,
// where a panic would take the process down.
func (p *Persister) commitWritesRecovering(s *slot, ops []*pendingWrite) (outcomes []sharestate.Outcome) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Error(fmt.Errorf("panic: %v", v), "Committing writes panicked", "partition", s.key.partition, "stack", string(debug.Stack()))
			s.remember(nil)
			outcomes = make([]sharestate.Outcome, len(ops))
			for i := range outcomes {
				outcomes[i] = sharestate.Fail(sharestate.ErrUnknownServerError, "the persister failed on partition %d: %v", s.key.partition, v)
			}
		}
	}()
	return p.commitWrites(s, ops)
}

// commitWrites applies the queued writes, in queue order, to the partition's state and stores the
// result in one conditional status update. Each write is validated against the state the writes before
// it left (semantics §4), so a fenced write fails alone and the others go on.
func (p *Persister) commitWrites(s *slot, ops []*pendingWrite) []sharestate.Outcome {
	// The committer serves many callers; none of their contexts may cut it short.
	ctx, cancel := p.operationContext(context.Background())
	defer cancel()
	outcomes := make([]sharestate.Outcome, len(ops))
	compute := func(obj *sharestatev1.SharePartitionState) (*sharestatev1.SharePartitionState, error) {
		stored, err := stateOf(obj)
		if err != nil {
			return nil, err
		}
		now := p.now()
		var write *sharestatev1.SharePartitionState
		current := stored
		for i, w := range ops {
			w.podFenced = false
			next, o := sharestate.ApplyWrite(current, w.req, w.known, p.opts.Limits)
			if o.OK() {
				// After the epoch checks: a fenced pod's write at its old state epoch is answered
				// FENCED_STATE_EPOCH, as semantics §9 says; one at the new state epoch is refused here.
				o = fencedPod(obj, w.id, w.req.LeaderEpoch)
				w.podFenced = !o.OK()
			}
			outcomes[i] = o
			if !o.OK() {
				continue
			}
			if write == nil {
				write = obj.DeepCopy()
			}
			current = &next
			recordWrite(write, w.id, w.req.LeaderEpoch, now)
		}
		if write != nil {
			setState(write, *current)
		}
		return write, nil
	}
	obj, result, err := p.updateLoop(ctx, p.opts.Client, s.key, s.cachedObject(), compute)
	if !loopEnded(result) {
		s.remember(nil)
		o := p.outcomeOf(s.key, result, err)
		for i := range outcomes {
			outcomes[i] = o
		}
		return outcomes
	}
	s.remember(p.labelLeader(ctx, p.opts.Client, s.key, obj))
	return outcomes
}
