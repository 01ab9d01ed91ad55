package v1alpha1

import (
	"fmt"
	"math"
)

// ResetTarget is one partition an offset reset initializes, with the start offset it gets. It is a
// value computed from a ShareGroup, not part of the API.
// +kubebuilder:object:generate=false
type ResetTarget struct {
	TopicID     TopicID
	Partition   int32
	StartOffset int64
}

// ResetTargets lists the partitions the request names, in the request's order, from the group's
// declared topics; or it says what the request names that the group does not declare, which the
// operator refuses. The operator and the kubectl plugin both plan a reset with it.
func (sg *ShareGroup) ResetTargets(req OffsetResetRequest) ([]ResetTarget, error) {
	declared := make(map[TopicID]int32, len(sg.Spec.Topics))
	for _, t := range sg.Spec.Topics {
		declared[t.TopicID] = t.Partitions
	}
	var targets []ResetTarget
	for _, t := range req.Topics {
		count, ok := declared[t.TopicID]
		if !ok {
			return nil, fmt.Errorf("topic %s is not declared in spec.topics of group %q", t.TopicID, sg.Spec.GroupID)
		}
		named := t.Partitions
		if len(named) == 0 {
			named = make([]int32, count)
			for p := range count {
				named[p] = p
			}
		}
		for _, p := range named {
			if p >= count {
				return nil, fmt.Errorf("topic %s declares %d partitions, not partition %d", t.TopicID, count, p)
			}
			targets = append(targets, ResetTarget{TopicID: t.TopicID, Partition: p, StartOffset: t.StartOffset()})
		}
	}
	return targets, nil
}

// StartOffset is the start offset the reset gives the topic's partitions: 0 for Earliest (the leader
// moves it up to the log start offset), the request's offset, or -1 for AutoOffsetReset (the leader
// applies share.auto.offset.reset).
func (t OffsetResetTopic) StartOffset() int64 {
	switch {
	case t.To == OffsetResetToOffset && t.Offset != nil:
		return *t.Offset
	case t.To == OffsetResetToAutoOffsetReset:
		return -1
	default:
		return 0
	}
}

// NextResetStateEpoch is the state epoch a reset initializes at: one above the group's, its last
// reset's and every one of the partitions'. It is an int64 so that the top of the int32 range shows
// instead of overflowing; MaxResetStateEpoch is the highest a reset may use.
func (sg *ShareGroup) NextResetStateEpoch(partitions []SharePartitionState) int64 {
	epoch := sg.Status.StateEpoch
	if l := sg.Status.LastOffsetReset; l != nil {
		epoch = max(epoch, l.StateEpoch)
	}
	for i := range partitions {
		epoch = max(epoch, partitions[i].Status.StateEpoch)
	}
	return int64(epoch) + 1
}

// MaxResetStateEpoch is the highest state epoch a reset may initialize at: Initialize refuses
// 2147483647, which would leave no room for the operator's fence.
const MaxResetStateEpoch = math.MaxInt32 - 1

// DeclaredTopicName returns the name spec.topics gives the topic, or "" when it declares none.
func (sg *ShareGroup) DeclaredTopicName(id TopicID) string {
	for _, t := range sg.Spec.Topics {
		if t.TopicID == id {
			return t.Name
		}
	}
	return ""
}
