package controllers

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// PartitionBook is the operator's record of every SharePartitionState as it last looked at it: the
// resync's pass over every partition (a page at a time, spread over its period) and every status the
// fencing reconciler wrote. The ShareGroup reconciler computes a group's status from it, so that the
// group's totals cost no request of their own: the operator lists each partition once a resync
// period, however many groups and writes there are (docs/architecture.md, Fencing).
//
// It keeps of each partition a partitionSummary: what a group's status and its adoption read, a
// hundred-odd bytes, so that its memory grows by little per partition.
type PartitionBook struct {
	mu       sync.Mutex
	groups   map[groupKey]map[string]partitionSummary // by partition object name
	complete bool                                     // a pass over every partition has been recorded
}

// groupKey names a Kafka group's partitions in a namespace.
type groupKey struct {
	namespace string
	group     sharestatev1.GroupID
}

// partitionSummary is what the operator keeps of a partition between its looks.
type partitionSummary struct {
	name        string
	topicID     sharestatev1.TopicID
	partition   int32
	stateEpoch  int32
	initialized bool
	fenced      bool
	withLeader  bool
	inFlight    int64
	// deliveryComplete is the partition's delivery-complete count, 0 when it is not known (-1).
	deliveryComplete int64
	// controller is the UID of the object's controller (its ShareGroup), empty when it has none.
	controller types.UID
	// groupLabel is the object's sharestate.dev/share-group label.
	groupLabel string
	// topicNamed says spec.topicName is set.
	topicNamed bool
	// misnamed says the object's name is not the one derived from its key (the persister never reads
	// it), worked out once when the partition is recorded rather than at each of its group's passes.
	misnamed bool
}

// summaryOf summarizes a partition as the operator read or wrote it.
func summaryOf(p *sharestatev1.SharePartitionState) partitionSummary {
	s := partitionSummary{
		name: p.Name, topicID: p.Spec.TopicID, partition: p.Spec.Partition, stateEpoch: p.Status.StateEpoch,
		initialized: p.Status.CreateTime != nil, fenced: isFenced(p), withLeader: p.Status.Leader != nil,
		inFlight: inFlight(p), groupLabel: p.Labels[sharestatev1.LabelShareGroup], topicNamed: p.Spec.TopicName != "",
		misnamed: p.Name != sharestatev1.SharePartitionStateName(string(p.Spec.GroupID), string(p.Spec.TopicID), p.Spec.Partition),
	}
	if p.Status.DeliveryCompleteCount > 0 {
		s.deliveryComplete = int64(p.Status.DeliveryCompleteCount)
	}
	if owner := metav1.GetControllerOf(p); owner != nil {
		s.controller = owner.UID
	}
	return s
}

// NewPartitionBook returns an empty book; it is complete after the first pass.
func NewPartitionBook() *PartitionBook {
	return &PartitionBook{groups: map[groupKey]map[string]partitionSummary{}}
}

// record keeps the partition's summary.
func (b *PartitionBook) record(p *sharestatev1.SharePartitionState) {
	summary := summaryOf(p)
	key := groupKey{namespace: p.Namespace, group: p.Spec.GroupID}
	b.mu.Lock()
	defer b.mu.Unlock()
	partitions := b.groups[key]
	if partitions == nil {
		partitions = map[string]partitionSummary{}
		b.groups[key] = partitions
	}
	partitions[p.Name] = summary
}

// passed ends a pass over every partition: what it did not see is gone, and the book is complete. It
// returns the counts of the partitions it then holds.
func (b *PartitionBook) passed(seen map[types.NamespacedName]bool) partitionCounts {
	b.mu.Lock()
	defer b.mu.Unlock()
	var counts partitionCounts
	for key, partitions := range b.groups {
		for name, p := range partitions {
			if !seen[types.NamespacedName{Namespace: key.namespace, Name: name}] {
				delete(partitions, name)
				continue
			}
			counts.add(p)
		}
		if len(partitions) == 0 {
			delete(b.groups, key)
		}
	}
	b.complete = true
	return counts
}

// partitionsOf returns the group's partitions as last seen, and false until a pass over every
// partition has been recorded (before it, an absent partition may only not have been seen yet).
func (b *PartitionBook) partitionsOf(namespace string, group sharestatev1.GroupID) ([]partitionSummary, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.complete {
		return nil, false
	}
	partitions := b.groups[groupKey{namespace: namespace, group: group}]
	out := make([]partitionSummary, 0, len(partitions))
	for _, p := range partitions {
		out = append(out, p)
	}
	return out, true
}
