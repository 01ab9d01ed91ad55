package partitionbook

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// Book holds a Summary of every SharePartitionState as the operator last looked at it. It is safe for
// concurrent use.
type Book struct {
	mu       sync.Mutex
	groups   map[groupKey]map[string]Summary // by partition object name
	complete bool                            // a pass over every partition has been recorded
}

// groupKey names a Kafka group's partitions in a namespace.
type groupKey struct {
	namespace string
	group     sharestatev1.GroupID
}

// New returns an empty book; it is complete after the first pass.
func New() *Book {
	return &Book{groups: map[groupKey]map[string]Summary{}}
}

// Record keeps the partition's summary, in place of the one it had.
func (b *Book) Record(p *sharestatev1.SharePartitionState) {
	summary := SummaryOf(p)
	key := groupKey{namespace: p.Namespace, group: p.Spec.GroupID}
	b.mu.Lock()
	defer b.mu.Unlock()
	partitions := b.groups[key]
	if partitions == nil {
		partitions = map[string]Summary{}
		b.groups[key] = partitions
	}
	partitions[p.Name] = summary
}

// Passed ends a pass over every partition: what it did not see is gone, and the book is complete. It
// returns the counts of the partitions it then holds.
func (b *Book) Passed(seen map[types.NamespacedName]bool) Counts {
	b.mu.Lock()
	defer b.mu.Unlock()
	var counts Counts
	for key, partitions := range b.groups {
		for name, p := range partitions {
			if !seen[types.NamespacedName{Namespace: key.namespace, Name: name}] {
				delete(partitions, name)
				continue
			}
			counts.Add(p)
		}
		if len(partitions) == 0 {
			delete(b.groups, key)
		}
	}
	b.complete = true
	return counts
}

// Group returns the group's partitions as last seen, in no order, and false until a pass over every
// partition has been recorded.
func (b *Book) Group(namespace string, group sharestatev1.GroupID) ([]Summary, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.complete {
		return nil, false
	}
	partitions := b.groups[groupKey{namespace: namespace, group: group}]
	out := make([]Summary, 0, len(partitions))
	for _, p := range partitions {
		out = append(out, p)
	}
	return out, true
}
