package bench

import (
	"context"
	"fmt"
	"sync/atomic"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// The share-partitions every scenario writes, and the shape of its writes: a share-partition leader
// that acknowledges most records, rejects one and releases one in every run of offsetsPerWrite
// offsets, and whose start offset trails its newest write by trailingOffsets. The stored state then
// settles at about 3*trailingOffsets/offsetsPerWrite batches (60), roughly 1.5 KB of JSON.
const (
	groupID     = "bench-group"
	topicIDText = "q1Sh0o2QRbuBzMz8vEMbvQ"

	// baseOffset is where every partition starts: offsets near 10^12 make the stored strings as long
	// as a busy topic's.
	baseOffset      int64 = 1_000_000_000_000
	offsetsPerWrite int64 = 10
	trailingOffsets int64 = 200

	// benchEpoch is the state and leader epoch the raw scenarios store; the persister scenarios use the
	// epochs their Initialize and Read answered.
	benchEpoch int32 = 1
)

// benchTopic is topicIDText parsed.
var benchTopic = sharestate.MustParseTopicID(topicIDText)

// identity is the broker every scenario writes as.
var identity = persister.Identity{BrokerID: 1, PodName: "bench-broker", PodUID: "uid"}

// stateWrite is the content of one write to one partition.
type stateWrite struct {
	startOffset           int64
	deliveryCompleteCount int32
	batches               []sharestate.StateBatch
}

// offsetCursor hands out the writes of one partition. The n-th write covers the n-th run of
// offsetsPerWrite offsets, so that concurrent writers of one partition never write the same offsets:
// they behave like the in-memory state machine of one share-partition leader whose writes overtake one
// another on the way to the store.
type offsetCursor struct {
	n atomic.Int64
}

func (c *offsetCursor) next() stateWrite {
	first := baseOffset + (c.n.Add(1)-1)*offsetsPerWrite
	start := max(baseOffset, first-trailingOffsets)
	// Of every run of offsetsPerWrite offsets all but the released one are complete.
	complete := (first + offsetsPerWrite - start) * (offsetsPerWrite - 1) / offsetsPerWrite
	return stateWrite{
		startOffset:           start,
		deliveryCompleteCount: int32(complete),
		batches: []sharestate.StateBatch{
			{FirstOffset: first, LastOffset: first + offsetsPerWrite - 3, DeliveryState: sharestate.DeliveryStateAcknowledged, DeliveryCount: 1},
			{FirstOffset: first + offsetsPerWrite - 2, LastOffset: first + offsetsPerWrite - 2, DeliveryState: sharestate.DeliveryStateArchived, DeliveryCount: 1},
			{FirstOffset: first + offsetsPerWrite - 1, LastOffset: first + offsetsPerWrite - 1, DeliveryState: sharestate.DeliveryStateAvailable, DeliveryCount: 1},
		},
	}
}

// applyWrite does to a stored status what a Write does (semantics §5) for the scenarios that write the
// objects themselves: the start offset only moves forward, the batches are combined, the write is
// stamped and counted. Epochs are not checked: these writers are alone on their objects.
func applyWrite(status *v1alpha1.SharePartitionStateStatus, w stateWrite, now metav1.Time) error {
	batches, err := persister.StoredBatches(status)
	if err != nil {
		return fmt.Errorf("decoding the stored batches: %w", err)
	}
	status.StartOffset = max(status.StartOffset, w.startOffset)
	status.DeliveryCompleteCount = w.deliveryCompleteCount
	status.StateBatches = persister.StorageForm(sharestate.CombineBatches(batches, w.batches, status.StartOffset))
	status.WriteTime = &now
	status.WriteCount++
	return nil
}

// createStates creates the SharePartitionStates of partitions 0..n-1 the way an Initialize would
// leave them (epochs benchEpoch, start offset baseOffset, no batches) and returns them as stored.
func createStates(ctx context.Context, c client.Client, namespace string, n int) ([]*v1alpha1.SharePartitionState, error) {
	// The baselines update objects of the very shape the persister writes (its ShareGroup owner
	// reference and label included, created by its Initialize), so that the comparison measures the
	// persister's work and not a difference in object size.
	if _, _, err := ledPartitions(ctx, c, namespace, n); err != nil {
		return nil, err
	}
	states := make([]*v1alpha1.SharePartitionState, n)
	for i := range states {
		obj := &v1alpha1.SharePartitionState{}
		key := client.ObjectKey{Namespace: namespace, Name: v1alpha1.SharePartitionStateName(groupID, topicIDText, int32(i))}
		if err := c.Get(ctx, key, obj); err != nil {
			return nil, fmt.Errorf("reading the state of partition %d: %w", i, err)
		}
		states[i] = obj
	}
	return states, nil
}
