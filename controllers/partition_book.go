package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// PartitionBook is the operator's record of every SharePartitionState as it last looked at it: the
// resync's pass over every partition (a page at a time, spread over its period) and every status the
// fencing reconciler wrote. The ShareGroup reconciler computes a group's status from it, so that the
// group's totals cost no request of their own: the operator lists each partition once a resync
// period, however many groups and writes there are (docs/architecture.md, "What the operator
// watches").
//
// It holds each partition without its state batches and managedFields (withoutStateBatches): a few
// hundred bytes to a KB each. Its entries are copies that nobody changes in place.
type PartitionBook struct {
	mu       sync.Mutex
	groups   map[groupKey]map[string]*sharestatev1.SharePartitionState
	complete bool // a pass over every partition has been recorded
}

// groupKey names a Kafka group's partitions in a namespace.
type groupKey struct {
	namespace string
	group     sharestatev1.GroupID
}

// NewPartitionBook returns an empty book; it is complete after the first pass.
func NewPartitionBook() *PartitionBook {
	return &PartitionBook{groups: map[groupKey]map[string]*sharestatev1.SharePartitionState{}}
}

// record keeps the partition as given, without its state batches (a copy: p is not changed).
func (b *PartitionBook) record(p *sharestatev1.SharePartitionState) {
	slim := p.DeepCopy()
	withoutStateBatches(slim)
	key := groupKey{namespace: p.Namespace, group: p.Spec.GroupID}
	b.mu.Lock()
	defer b.mu.Unlock()
	partitions := b.groups[key]
	if partitions == nil {
		partitions = map[string]*sharestatev1.SharePartitionState{}
		b.groups[key] = partitions
	}
	partitions[p.Name] = slim
}

// passed ends a pass over every partition: what it did not see is gone, and the book is complete. It
// returns the groups the pass saw or dropped partitions of, whose status is then to be recomputed.
func (b *PartitionBook) passed(seen map[types.NamespacedName]bool) []groupKey {
	b.mu.Lock()
	defer b.mu.Unlock()
	groups := make([]groupKey, 0, len(b.groups))
	for key, partitions := range b.groups {
		groups = append(groups, key)
		for name := range partitions {
			if !seen[types.NamespacedName{Namespace: key.namespace, Name: name}] {
				delete(partitions, name)
			}
		}
		if len(partitions) == 0 {
			delete(b.groups, key)
		}
	}
	b.complete = true
	return groups
}

// partitionsOf returns copies of the group's partitions as last seen, and false until a pass over
// every partition has been recorded (before it, an absent partition may only not have been seen yet).
func (b *PartitionBook) partitionsOf(namespace string, group sharestatev1.GroupID) ([]sharestatev1.SharePartitionState, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.complete {
		return nil, false
	}
	partitions := b.groups[groupKey{namespace: namespace, group: group}]
	out := make([]sharestatev1.SharePartitionState, 0, len(partitions))
	for _, p := range partitions {
		out = append(out, *p.DeepCopy())
	}
	return out, true
}
