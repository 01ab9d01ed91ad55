package persister

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// errNoObject tells initialize that the state must be created, which an update cannot do.
var errNoObject = errors.New("the share-partition has no object yet")

// initialize is one partition's Initialize.
func (p *Persister) initialize(ctx context.Context, group string, topic sharestate.TopicID, in sharestate.InitializePartition) sharestate.Outcome {
	if o := sharestate.CheckGroupID(group); !o.OK() {
		return o
	}
	if o := sharestate.CheckInitializeInput(topic, in); !o.OK() {
		return o
	}
	known, err := p.topology.known(ctx, group, topic, in.Partition)
	if err != nil {
		return unavailable(err)
	}
	key := partitionKey{group: group, topic: topic, partition: in.Partition}
	var outcome sharestate.Outcome
	compute := func(obj *sharestatev1.SharePartitionState) (*sharestatev1.SharePartitionState, error) {
		stored, err := stateOf(obj)
		if err != nil {
			// A reset is how an admin recovers a corrupt state: only the stored state epoch matters
			// to Initialize, and the batches are thrown away.
			if obj.Status.StateEpoch > in.StateEpoch {
				return nil, err
			}
			stored = &sharestate.State{StateEpoch: obj.Status.StateEpoch, LeaderEpoch: obj.Status.LeaderEpoch}
		}
		next, o := sharestate.ApplyInitialize(stored, in, known)
		outcome = o
		if !o.OK() {
			return nil, nil
		}
		if obj == nil {
			return nil, errNoObject
		}
		write := obj.DeepCopy()
		resetState(write, next, p.now())
		// The raised count is what lets the schema take a start offset lowered at an equal state
		// epoch: Kafka re-initializes there too (semantics §5, §9).
		write.Status.InitializeCount++
		return write, nil
	}
	s := p.slots.get(key)
	var start *sharestatev1.SharePartitionState // nil: read first; Initialize is rare, so always read
	for range 3 {
		obj, result, err := p.updateLoop(ctx, p.opts.BulkClient, key, start, compute)
		if errors.Is(err, errNoObject) {
			if start, err = p.createObject(ctx, key); err != nil {
				return createFailure(err)
			}
			continue
		}
		if !loopEnded(result) {
			s.remember(nil)
			return p.outcomeOf(key, result, err)
		}
		s.remember(obj)
		return outcome
	}
	return sharestate.Fail(sharestate.ErrCoordinatorLoadInProgress, "the share-partition's object keeps disappearing; retry")
}

// errGroupNameTaken says the ShareGroup name derived from a group id is held by a ShareGroup of
// another group id (one a user created under that name), so the persister has no group to own the
// partition's state.
var errGroupNameTaken = errors.New("the ShareGroup name of the group id is taken")

// createFailure answers an Initialize whose object could not be created: retriable while the API
// server cannot be reached, final when it refused or the group's name is taken.
func createFailure(err error) sharestate.Outcome {
	if errors.Is(err, errGroupNameTaken) || classify(err) == classPermanent {
		return sharestate.Fail(sharestate.ErrUnknownServerError, "%v", err)
	}
	return unavailable(err)
}

// createObject creates the partition's SharePartitionState (without state: the status is written
// next), and its group's ShareGroup if there is none. An object someone else created is as good.
func (p *Persister) createObject(ctx context.Context, key partitionKey) (*sharestatev1.SharePartitionState, error) {
	owner, err := p.ensureShareGroup(ctx, key.group)
	if err != nil {
		return nil, err
	}
	obj := newObject(p.opts.Namespace, key, owner)
	err = p.withRetry(ctx, "create", func(ctx context.Context) error { return p.opts.BulkClient.Create(ctx, obj) })
	switch classify(err) {
	case classOK:
		return p.stripManagedFields(ctx, p.opts.BulkClient, obj), nil
	case classExists:
		found, err := p.getWithRetry(ctx, p.opts.BulkClient, key)
		if err != nil || found == nil {
			return found, err
		}
		return p.stripManagedFields(ctx, p.opts.BulkClient, found), nil
	default:
		return nil, fmt.Errorf("creating the SharePartitionState: %w", err)
	}
}

// ensureShareGroup returns the group's ShareGroup, creating one that declares nothing, under the
// derived name, if there is none.
func (p *Persister) ensureShareGroup(ctx context.Context, group string) (*sharestatev1.ShareGroup, error) {
	sg, err := findShareGroup(ctx, p.opts.BulkClient, p.opts.Namespace, group, p.withRetry)
	if err != nil || sg != nil {
		return sg, err
	}
	sg = &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.opts.Namespace, Name: sharestatev1.ShareGroupName(group)},
		Spec:       sharestatev1.ShareGroupSpec{GroupID: sharestatev1.GroupID(group)},
	}
	err = p.withRetry(ctx, "create", func(ctx context.Context) error { return p.opts.BulkClient.Create(ctx, sg) })
	if classify(err) == classExists {
		// Another persister created it meanwhile, or the name is held by a ShareGroup of another
		// group id, which findShareGroup does not return.
		found, err := findShareGroup(ctx, p.opts.BulkClient, p.opts.Namespace, group, p.withRetry)
		if err == nil && found == nil {
			return nil, fmt.Errorf("%w: ShareGroup %s/%s declares another group id; create a ShareGroup "+
				"with spec.groupId %q under another name", errGroupNameTaken, sg.Namespace, sg.Name, group)
		}
		return found, err
	}
	if err != nil {
		return nil, fmt.Errorf("creating the ShareGroup: %w", err)
	}
	p.topology.forget(group)
	return sg, nil
}

// withRetry runs one API request, each attempt bounded by RequestTimeout, retrying with backoff while
// it fails in a retriable way and ctx lasts. It returns the last error.
func (p *Persister) withRetry(ctx context.Context, verb string, request func(context.Context) error) error {
	var bo backoff
	for {
		reqCtx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
		err := request(reqCtx)
		cancel()
		p.apiRequest(verb, err)
		if classify(err) != classRetriable || !bo.wait(ctx) {
			return err
		}
	}
}

// getWithRetry reads the partition's object (nil: none), retrying while the API server is unavailable.
func (p *Persister) getWithRetry(ctx context.Context, c client.Reader, key partitionKey) (*sharestatev1.SharePartitionState, error) {
	var bo backoff
	for {
		obj, err := p.getObject(ctx, c, key)
		if err == nil || classify(err) != classRetriable || !bo.wait(ctx) {
			return obj, err
		}
	}
}
