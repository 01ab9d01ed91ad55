package controllers

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
)

// aggregate computes a group's status from its share-partitions as observed: the counts, totals and
// the Ready and Fenced conditions. It keeps what it does not own (the last reset, the OffsetReset
// condition) from status.
func aggregate(sg *sharestatev1.ShareGroup, partitions []partitionbook.Summary, status sharestatev1.ShareGroupStatus) sharestatev1.ShareGroupStatus {
	var counts partitionbook.Counts
	status.StateEpoch, status.InFlightRecords, status.DeliveryCompleteRecords = 0, 0, 0
	for _, p := range partitions {
		counts.Add(p)
		status.StateEpoch = max(status.StateEpoch, p.StateEpoch)
		status.InFlightRecords += p.InFlight
		status.DeliveryCompleteRecords += p.DeliveryComplete
	}
	status.Partitions, status.InitializedPartitions = int32(counts.Total), int32(counts.Initialized)
	status.FencedPartitions, status.PartitionsWithLeader = int32(counts.Fenced), int32(counts.WithLeader)
	if r := status.LastOffsetReset; r != nil {
		status.StateEpoch = max(status.StateEpoch, r.StateEpoch)
	}
	meta.SetStatusCondition(&status.Conditions, readyCondition(sg, status, undeclared(sg, partitions)))
	meta.SetStatusCondition(&status.Conditions, fencedCondition(sg, status))
	status.ObservedGeneration = sg.Generation
	return status
}

// readyCondition says whether the group is Ready, and if not, why: first what waits for the user
// (a refused reset, state nothing reads), then what the system is still doing.
func readyCondition(sg *sharestatev1.ShareGroup, s sharestatev1.ShareGroupStatus, undeclared []string) metav1.Condition {
	c := metav1.Condition{Type: sharestatev1.ConditionReady, Status: metav1.ConditionFalse, ObservedGeneration: sg.Generation}
	refusal := resetRefusal(sg, s.Conditions)
	switch {
	case refusal != nil: // what the user asked for will not happen until they change it: say so first
		c.Reason, c.Message = sharestatev1.ReasonResetRefused, refusal.Message
	case len(undeclared) > 0:
		c.Reason, c.Message = sharestatev1.ReasonUndeclaredPartitionStates, undeclaredMessage(sg, undeclared)
	case s.Partitions == 0:
		c.Reason, c.Message = sharestatev1.ReasonNoPartitions, "no share-partition state exists for the group yet"
	case s.FencedPartitions > 0:
		c.Reason, c.Message = sharestatev1.ReasonPartitionsFenced, fmt.Sprintf("%d of %d partitions are fenced and wait for a new leader", s.FencedPartitions, s.Partitions)
	case s.InitializedPartitions < s.Partitions:
		c.Reason, c.Message = sharestatev1.ReasonPartitionsNotInitialized, fmt.Sprintf("%d of %d partitions are not initialized", s.Partitions-s.InitializedPartitions, s.Partitions)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, sharestatev1.ReasonAllPartitionsReady
		c.Message = fmt.Sprintf("%d partitions initialized, %d with a leader", s.Partitions, s.PartitionsWithLeader)
	}
	return c
}

func fencedCondition(sg *sharestatev1.ShareGroup, s sharestatev1.ShareGroupStatus) metav1.Condition {
	if s.FencedPartitions > 0 {
		return metav1.Condition{Type: sharestatev1.ConditionFenced, Status: metav1.ConditionTrue, Reason: sharestatev1.ReasonPartitionsFenced,
			Message: fmt.Sprintf("%d of %d partitions are fenced", s.FencedPartitions, s.Partitions), ObservedGeneration: sg.Generation}
	}
	return metav1.Condition{Type: sharestatev1.ConditionFenced, Status: metav1.ConditionFalse, Reason: sharestatev1.ReasonNoPartitionFenced,
		Message: "no partition is fenced", ObservedGeneration: sg.Generation}
}

// undeclared lists, sorted, the partitions whose state the group holds although spec.topics does not
// declare them (semantics §6), as "<name> (topic <topicId>, partition <n>)". The brokers are answered
// UNKNOWN_TOPIC_OR_PARTITION for such a partition, so nothing reads its state: its topic was re-created
// under a new id or declared with fewer partitions since, or the declaration is wrong.
func undeclared(sg *sharestatev1.ShareGroup, partitions []partitionbook.Summary) []string {
	var out []string
	for _, p := range partitions {
		if !sg.Declares(p.TopicID, p.Partition) {
			out = append(out, fmt.Sprintf("%s (topic %s, partition %d)", p.Name, p.TopicID, p.Partition))
		}
	}
	slices.Sort(out)
	return out
}

// undeclaredMessage is the Ready condition's message for the state of undeclared partitions: how
// many, the first maxNamesInMessage of them, and what to do.
func undeclaredMessage(sg *sharestatev1.ShareGroup, undeclared []string) string {
	listed := undeclared[:min(len(undeclared), maxNamesInMessage)]
	more := ""
	if len(undeclared) > len(listed) {
		more = fmt.Sprintf(" and %d more", len(undeclared)-len(listed))
	}
	return fmt.Sprintf("%d SharePartitionStates of group %q hold the state of partitions spec.topics does not declare, "+
		"which the brokers are answered UNKNOWN_TOPIC_OR_PARTITION for and nothing reads: %s%s; declare them in spec.topics "+
		"if they are still wanted, else delete them", len(undeclared), sg.Spec.GroupID, strings.Join(listed, ", "), more)
}
