package partitionbook

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// Summary is what the book keeps of a partition between the operator's looks.
type Summary struct {
	Name        string
	TopicID     sharestatev1.TopicID
	Partition   int32
	StateEpoch  int32
	Initialized bool
	Fenced      bool
	WithLeader  bool
	InFlight    int64
	// DeliveryComplete is the partition's delivery-complete count, 0 when it is not known (-1).
	DeliveryComplete int64
	// Controller is the UID of the object's controller (its ShareGroup), empty when it has none.
	Controller types.UID
	// GroupLabel is the object's sharestate.dev/share-group label.
	GroupLabel string
	// TopicNamed says spec.topicName is set.
	TopicNamed bool
	// Misnamed says the object's name is not the one derived from its key (the persister never reads
	// it), worked out once when the partition is recorded rather than at each of its group's passes.
	Misnamed bool
}

// SummaryOf summarizes a partition as the operator read or wrote it.
func SummaryOf(p *sharestatev1.SharePartitionState) Summary {
	s := Summary{
		Name: p.Name, TopicID: p.Spec.TopicID, Partition: p.Spec.Partition, StateEpoch: p.Status.StateEpoch,
		Initialized: p.Status.CreateTime != nil, Fenced: IsFenced(p), WithLeader: p.Status.Leader != nil,
		InFlight: InFlight(p), GroupLabel: p.Labels[sharestatev1.LabelShareGroup], TopicNamed: p.Spec.TopicName != "",
		Misnamed: p.Name != sharestatev1.SharePartitionStateName(string(p.Spec.GroupID), string(p.Spec.TopicID), p.Spec.Partition),
	}
	if p.Status.DeliveryCompleteCount > 0 {
		s.DeliveryComplete = int64(p.Status.DeliveryCompleteCount)
	}
	if owner := metav1.GetControllerOf(p); owner != nil {
		s.Controller = owner.UID
	}
	return s
}

// IsFenced reports a partition fenced and not taken since: no leader, and its Fenced condition True.
func IsFenced(p *sharestatev1.SharePartitionState) bool {
	return p.Status.Leader == nil && meta.IsStatusConditionTrue(p.Status.Conditions, sharestatev1.ConditionFenced)
}

// Counts counts partitions by condition.
type Counts struct {
	Total, Initialized, Fenced, WithLeader int
}

// Add counts the partition.
func (c *Counts) Add(p Summary) {
	c.Total++
	if p.Initialized {
		c.Initialized++
	}
	if p.Fenced {
		c.Fenced++
	}
	if p.WithLeader {
		c.WithLeader++
	}
}

// DropStateBatches drops the partition's state batches and managedFields, which no reconciler reads,
// once the one figure the operator needs from the batches is in status.inFlightRecords: the persister
// keeps it there with every state; for a state written before it did, it is counted here. Every list
// of partitions the operator makes goes through it (ListPages): a partition then holds a few hundred
// bytes instead of up to 10,000 batches, and a fence's copy and comparison of its status cost little.
//
// The object is no longer what the API server holds: nothing may write it back whole (an Update). The
// reconcilers write partitions with merge patches of what they change, so a field dropped or filled in
// here is the same on both sides of such a patch, and the patch leaves it as it is.
func DropStateBatches(p *sharestatev1.SharePartitionState) {
	p.ManagedFields = nil
	if p.Status.InFlightRecords == nil && len(p.Status.StateBatches) > 0 {
		count := countInFlight(&p.Status)
		p.Status.InFlightRecords = &count
	}
	p.Status.StateBatches = nil
}

// InFlight is a partition's count of not-yet-complete offsets: the one the persister keeps, else
// counted from the batches (a state written before the persister kept it).
func InFlight(p *sharestatev1.SharePartitionState) int64 {
	if n := p.Status.InFlightRecords; n != nil {
		return *n
	}
	return countInFlight(&p.Status)
}

// countInFlight counts the batches' not-yet-complete offsets. A state whose batches do not decode
// counts none (the persister reports it, and the partition's own status shows it).
func countInFlight(status *sharestatev1.SharePartitionStateStatus) int64 {
	batches, err := persister.StoredBatches(status)
	if err != nil {
		return 0
	}
	return sharestate.InFlightRecords(batches)
}
