package plugin

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// resetTarget is one partition a reset request names, with its state as it stands.
type resetTarget struct {
	sharestatev1.ResetTarget
	current *sharestatev1.SharePartitionState // nil: no state yet
}

// resetPlan is what the operator would do with a reset request, as far as it can be told beforehand.
type resetPlan struct {
	targets []resetTarget
	// stateEpoch is the state epoch the operator would choose now: one above the group's and every
	// partition's. (Fencing in the meantime can raise it.)
	stateEpoch int32
}

// planReset works out what the operator does with the request (sharestatev1.ShareGroup.ResetTargets and
// NextResetStateEpoch, which the operator calls too), and what it would refuse.
func planReset(sg *sharestatev1.ShareGroup, req sharestatev1.OffsetResetRequest, partitions []sharestatev1.SharePartitionState) (resetPlan, error) {
	targets, err := sg.ResetTargets(req, partitions)
	if err != nil {
		return resetPlan{}, err
	}
	next := sg.NextResetStateEpoch(partitions)
	if next > sharestatev1.MaxResetStateEpoch {
		return resetPlan{}, fmt.Errorf("a partition is at state epoch %d, and a reset may use at most %d", next-1, sharestatev1.MaxResetStateEpoch)
	}
	byKey := make(map[sharestatev1.TopicID]map[int32]*sharestatev1.SharePartitionState)
	for i := range partitions {
		p := &partitions[i]
		if byKey[p.Spec.TopicID] == nil {
			byKey[p.Spec.TopicID] = map[int32]*sharestatev1.SharePartitionState{}
		}
		byKey[p.Spec.TopicID][p.Spec.Partition] = p
	}
	plan := resetPlan{stateEpoch: int32(next), targets: make([]resetTarget, len(targets))}
	for i, t := range targets {
		plan.targets[i] = resetTarget{ResetTarget: t, current: byKey[t.TopicID][t.Partition]}
	}
	return plan, nil
}

// submitAction is what reset-offsets does with its request, given the group as it is.
type submitAction int

const (
	// submitWrite: write the request into spec.offsetReset.
	submitWrite submitAction = iota
	// submitPending: the same request (id and topics) is already in the spec; wait for it.
	submitPending
	// submitDone: the operator already carried out a request of this id.
	submitDone
)

// decideSubmit says what to do with req on the group sg: a request runs once per id, so the same id
// is the same request (it is waited for, not written again), the same id with other topics is a
// mistake, and a reset that the operator has started is not replaced before it completes.
func decideSubmit(sg *sharestatev1.ShareGroup, req sharestatev1.OffsetResetRequest) (submitAction, error) {
	last := sg.Status.LastOffsetReset
	current := sg.Spec.OffsetReset
	if current != nil && current.ID == req.ID {
		if !sameTopics(current.Topics, req.Topics) {
			return 0, fmt.Errorf("reset %q was already requested with other topics (%s); a new request needs a new --id",
				req.ID, resetRequest(current))
		}
		if last != nil && last.ID == req.ID && last.CompletionTime != nil {
			return submitDone, nil
		}
		return submitPending, nil
	}
	if last != nil && last.ID == req.ID && last.CompletionTime != nil {
		return submitDone, nil // carried out, then replaced by another request: it does not run again
	}
	if current != nil && last != nil && last.ID == current.ID && last.CompletionTime == nil && !refused(sg) {
		return 0, fmt.Errorf("reset %q is in progress since %s; wait for it to complete before requesting another",
			current.ID, stampPtr(last.StartTime, time.Now()))
	}
	return submitWrite, nil
}

// refused reports whether the operator refused the group's current reset request.
func refused(sg *sharestatev1.ShareGroup) bool {
	return refusal(sg, sg.Generation) != nil
}

// refusal returns the OffsetReset condition when it reports a refusal of the request of generation
// (or later): False for any reason but "in progress" (the operator refuses an undeclared topic or
// partition, and a state epoch it cannot raise further).
func refusal(sg *sharestatev1.ShareGroup, generation int64) *metav1.Condition {
	c := meta.FindStatusCondition(sg.Status.Conditions, sharestatev1.ConditionOffsetReset)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason == sharestatev1.ReasonResetInProgress || c.ObservedGeneration < generation {
		return nil
	}
	return c
}

// errRefused marks the operator's refusal of a request reset-offsets wrote.
var errRefused = errors.New("the operator refused")

// sameTopics compares two requests' topics, with partitions as sets (the schema keeps them as a set).
func sameTopics(a, b []sharestatev1.OffsetResetTopic) bool {
	return equality.Semantic.DeepEqual(normalTopics(a), normalTopics(b))
}

func normalTopics(topics []sharestatev1.OffsetResetTopic) []sharestatev1.OffsetResetTopic {
	out := make([]sharestatev1.OffsetResetTopic, len(topics))
	for i, t := range topics {
		out[i] = *t.DeepCopy()
		slices.Sort(out[i].Partitions)
		if len(out[i].Partitions) == 0 {
			out[i].Partitions = nil
		}
	}
	slices.SortFunc(out, func(x, y sharestatev1.OffsetResetTopic) int {
		switch {
		case x.TopicID < y.TopicID:
			return -1
		case x.TopicID > y.TopicID:
			return 1
		}
		return 0
	})
	return out
}

// resetOutcome reads the group for the outcome of request id, submitted at generation: done once the
// operator recorded its completion; an error when the operator refused it or the request was replaced.
func resetOutcome(sg *sharestatev1.ShareGroup, id string, generation int64) (bool, error) {
	if l := sg.Status.LastOffsetReset; l != nil && l.ID == id && l.CompletionTime != nil {
		return true, nil
	}
	if req := sg.Spec.OffsetReset; req == nil || req.ID != id {
		return false, fmt.Errorf("reset %q was replaced while waiting: the group now requests %s", id, resetRequest(req))
	}
	if c := refusal(sg, generation); c != nil {
		// The operator's message names the request and what to do with it; say each once.
		why := sharestatev1.ResetRefusalWhy(c.Message, id)
		return false, fmt.Errorf("%w reset %q (%s): %s", errRefused, id, c.Reason, why)
	}
	return false, nil
}
