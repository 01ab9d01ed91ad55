package persister

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// delete is one partition's Delete: it removes the partition's object. The delete names the object's
// UID, so a retry after a lost answer never removes a state that an Initialize created meanwhile.
func (p *Persister) delete(ctx context.Context, group string, topic sharestate.TopicID, in sharestate.DeletePartition) sharestate.Outcome {
	if o := sharestate.CheckGroupID(group); !o.OK() {
		return o
	}
	if o := sharestate.CheckKeyInput(topic, in.Partition); !o.OK() {
		return o
	}
	if o := p.checkKnown(ctx, group, topic, in.Partition); !o.OK() {
		return o
	}
	key := partitionKey{group: group, topic: topic, partition: in.Partition}
	s := p.slots.get(key)
	defer s.remember(nil)
	obj, err := p.getWithRetry(ctx, p.opts.BulkClient, key)
	if err != nil {
		return unavailable(err)
	}
	if obj == nil {
		return sharestate.Outcome{}
	}
	uid := obj.UID
	err = p.withRetry(ctx, "delete", func(ctx context.Context) error {
		return p.opts.BulkClient.Delete(ctx, obj, client.Preconditions{UID: &uid})
	})
	switch classify(err) {
	case classOK, classNotFound:
		return sharestate.Outcome{}
	case classConflict:
		// The object was deleted, and created again by an Initialize, since we read it: the state we
		// were asked to delete is gone, and the new one is not ours to delete.
		return sharestate.Outcome{}
	case classRetriable:
		return unavailable(err)
	default:
		return sharestate.Fail(sharestate.ErrUnknownServerError, "%v", fmt.Errorf("deleting the SharePartitionState: %w", err))
	}
}
