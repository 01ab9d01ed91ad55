package v1alpha1

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// ResetTarget is one partition an offset reset initializes, with the start offset it gets. It is a
// value computed from a ShareGroup, not part of the API.
// +kubebuilder:object:generate=false
type ResetTarget struct {
	TopicID     TopicID
	Partition   int32
	StartOffset int64
}

// ResetRefusal says why the operator refuses a reset request as written: Reason is the OffsetReset
// condition's reason, the message what is wrong and how to put it right.
// +kubebuilder:object:generate=false
type ResetRefusal struct {
	Reason  string
	Message string
}

func (r *ResetRefusal) Error() string { return r.Message }

// IsResetRefusedReason reports whether an OffsetReset condition's reason is a refusal: the request as
// written will never run, and the operator waits for the spec to change.
func IsResetRefusedReason(reason string) bool {
	switch reason {
	case ReasonResetUndeclaredTopic, ReasonResetUndeclaredPartition, ReasonResetNoPartitions, ReasonStateEpochExhausted:
		return true
	}
	return false
}

// ResetTargets lists the partitions the request names, in the request's order, or refuses it with a
// *ResetRefusal. The operator and the kubectl plugin both plan a reset with it.
//
// Which partitions a topic has follows from what the group declares (semantics §6). When spec.topics
// declares topics, a topic must be among them and its partitions below the declared count; all of
// them are the declared count. When it declares none, every partition is known: the request's
// partitions are taken as they are, and "all" are the partitions whose state exists (existing, the
// group's SharePartitionStates), since nothing else says how many the topic has.
func (sg *ShareGroup) ResetTargets(req OffsetResetRequest, existing []SharePartitionState) ([]ResetTarget, error) {
	var targets []ResetTarget
	for _, t := range req.Topics {
		partitions, err := sg.resetPartitions(t, existing)
		if err != nil {
			return nil, err
		}
		for _, p := range partitions {
			targets = append(targets, ResetTarget{TopicID: t.TopicID, Partition: p, StartOffset: t.StartOffset()})
		}
	}
	return targets, nil
}

// resetPartitions lists the partitions of one topic of a reset request.
func (sg *ShareGroup) resetPartitions(t OffsetResetTopic, existing []SharePartitionState) ([]int32, error) {
	if len(sg.Spec.Topics) == 0 {
		if len(t.Partitions) > 0 {
			return t.Partitions, nil
		}
		var found []int32
		for i := range existing {
			if existing[i].Spec.TopicID == t.TopicID {
				found = append(found, existing[i].Spec.Partition)
			}
		}
		if len(found) == 0 {
			return nil, &ResetRefusal{Reason: ReasonResetNoPartitions, Message: fmt.Sprintf("topic %s has no share-partition state "+
				"in group %q and the group declares no topics, so the partitions to reset are unknown: list them in the "+
				"request's partitions, or declare the topic in spec.topics (topicId, name, partitions); once spec.topics "+
				"declares a topic, every topic it does not list is UNKNOWN_TOPIC_OR_PARTITION to the brokers", t.TopicID, sg.Spec.GroupID)}
		}
		slices.Sort(found)
		return slices.Compact(found), nil
	}
	i := slices.IndexFunc(sg.Spec.Topics, func(d ShareGroupTopic) bool { return d.TopicID == t.TopicID })
	if i < 0 {
		return nil, &ResetRefusal{Reason: ReasonResetUndeclaredTopic, Message: fmt.Sprintf("topic %s is not declared in "+
			"spec.topics of group %q, which declares %d topics: add it (topicId, name, partitions), or reset a declared "+
			"topic; a topic spec.topics does not list is UNKNOWN_TOPIC_OR_PARTITION to the brokers", t.TopicID, sg.Spec.GroupID, len(sg.Spec.Topics))}
	}
	count := sg.Spec.Topics[i].Partitions
	if len(t.Partitions) == 0 {
		all := make([]int32, count)
		for p := range count {
			all[p] = p
		}
		return all, nil
	}
	for _, p := range t.Partitions {
		if p >= count {
			return nil, &ResetRefusal{Reason: ReasonResetUndeclaredPartition, Message: fmt.Sprintf("topic %s declares %d "+
				"partitions in spec.topics of group %q, so partition %d does not exist; raise its partitions or leave %d out",
				t.TopicID, count, sg.Spec.GroupID, p, p)}
		}
	}
	return t.Partitions, nil
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

// Declares reports whether the group knows the partition by its declaration (semantics §6): every
// partition when spec.topics declares no topic, else one of a declared topic below its partition count.
func (sg *ShareGroup) Declares(topic TopicID, partition int32) bool {
	if len(sg.Spec.Topics) == 0 {
		return true
	}
	i := slices.IndexFunc(sg.Spec.Topics, func(d ShareGroupTopic) bool { return d.TopicID == topic })
	return i >= 0 && partition < sg.Spec.Topics[i].Partitions
}

// DeclaredTopicName returns the name spec.topics gives the topic, or "" when it declares none.
func (sg *ShareGroup) DeclaredTopicName(id TopicID) string {
	for _, t := range sg.Spec.Topics {
		if t.TopicID == id {
			return t.Name
		}
	}
	return ""
}

// resetRefusalSuffix ends the message of a refused reset request: what the user can do about it.
const resetRefusalSuffix = "; change or remove spec.offsetReset"

// ResetRefusalMessage is the OffsetReset condition's message for reset request id, which will not run
// as written because of why.
func ResetRefusalMessage(id, why string) string {
	return resetRefusalPrefix(id) + why + resetRefusalSuffix
}

// ResetRefusalWhy returns the why of a message ResetRefusalMessage made for request id, so that a
// client quoting it names the request and the remedy in words of its own; any other message is
// returned as it is.
func ResetRefusalWhy(message, id string) string {
	why, ok := strings.CutPrefix(message, resetRefusalPrefix(id))
	if !ok {
		return message
	}
	return strings.TrimSuffix(why, resetRefusalSuffix)
}

func resetRefusalPrefix(id string) string {
	return fmt.Sprintf("reset %q will not run as written: ", id)
}
