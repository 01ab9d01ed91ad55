package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SetObservedConditions sets the conditions that follow from the object as it stands: Initialized
// always, and Fenced turned False once a leader holds the partition again (a fence sets Fenced True,
// and it stays so until a new leader's Read records itself). The operator sets them on what it
// observes; the persister on what it writes when it initializes the state or records a new leader,
// so that the operator then has nothing to change (its write, which would make the leader's next
// Write conflict, is skipped).
func (s *SharePartitionState) SetObservedConditions() {
	initialized := metav1.Condition{Type: ConditionInitialized, Status: metav1.ConditionFalse,
		Reason: ReasonNotInitialized, Message: "the persister has not initialized the state yet", ObservedGeneration: s.Generation}
	if s.Status.CreateTime != nil {
		initialized.Status, initialized.Reason = metav1.ConditionTrue, ReasonStateInitialized
		initialized.Message = fmt.Sprintf("state initialized at state epoch %d", s.Status.StateEpoch)
	}
	meta.SetStatusCondition(&s.Status.Conditions, initialized)

	if l := s.Status.Leader; l != nil {
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
			Type: ConditionFenced, Status: metav1.ConditionFalse, Reason: ReasonLeaderAlive,
			Message:            fmt.Sprintf("broker %d (pod %s) leads at leader epoch %d", l.BrokerID, l.PodName, l.LeaderEpoch),
			ObservedGeneration: s.Generation,
		})
	} else if !meta.IsStatusConditionTrue(s.Status.Conditions, ConditionFenced) {
		// No leader, and not because of a fence: new, or reset (which clears the leader).
		meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
			Type: ConditionFenced, Status: metav1.ConditionFalse, Reason: ReasonNoLeader,
			Message: "no leader has read the state since it was (re)initialized", ObservedGeneration: s.Generation,
		})
	}
	s.Status.ObservedGeneration = s.Generation
}
