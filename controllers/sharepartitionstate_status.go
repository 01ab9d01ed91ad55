package controllers

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// leaderVerdict is what the reconciler concluded about a partition's recorded leader.
type leaderVerdict struct {
	// stale says the leader is gone and the partition must be fenced, for reason (a condition reason).
	stale   bool
	reason  string
	message string
	// recheckAfter, when not zero, is when a not-Ready leader's grace period ends.
	recheckAfter time.Duration
}

// judgeLeader decides whether the recorded leader is stale, from its pod as observed (nil: the pod
// does not exist). notReadyGrace > 0 also fences a leader whose pod has not been Ready for that long.
func judgeLeader(leader *sharestatev1.LeaderRef, pod *corev1.Pod, now time.Time, notReadyGrace time.Duration) leaderVerdict {
	if leader == nil || leader.PodName == "" {
		return leaderVerdict{} // nobody to fence, or a leader that gave no pod to watch
	}
	switch {
	case pod == nil:
		return stale(sharestatev1.ReasonLeaderPodDeleted, "leader pod %s (broker %d) was deleted", leader.PodName, leader.BrokerID)
	case leader.PodUID != "" && string(pod.UID) != leader.PodUID:
		return stale(sharestatev1.ReasonLeaderPodReplaced, "leader pod %s (broker %d) was replaced: uid %s, recorded %s", leader.PodName, leader.BrokerID, pod.UID, leader.PodUID)
	case pod.DeletionTimestamp != nil:
		return stale(sharestatev1.ReasonLeaderPodTerminating, "leader pod %s (broker %d) is terminating", leader.PodName, leader.BrokerID)
	case pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded:
		return stale(sharestatev1.ReasonLeaderPodFinished, "leader pod %s (broker %d) is %s", leader.PodName, leader.BrokerID, pod.Status.Phase)
	}
	if notReadyGrace <= 0 {
		return leaderVerdict{}
	}
	since, ready := notReadySince(pod)
	if ready {
		return leaderVerdict{}
	}
	if elapsed := now.Sub(since); elapsed < notReadyGrace {
		return leaderVerdict{recheckAfter: notReadyGrace - elapsed}
	}
	return stale(sharestatev1.ReasonLeaderPodNotReady, "leader pod %s (broker %d) has not been Ready since %s", leader.PodName, leader.BrokerID, since.UTC().Format(time.RFC3339))
}

// podGone reports a stale verdict whose pod can never lead again under its UID: deleted, terminating,
// finished or replaced (a not-Ready pod may become Ready again).
func (v leaderVerdict) podGone() bool {
	return v.stale && v.reason != sharestatev1.ReasonLeaderPodNotReady
}

func stale(reason, format string, args ...any) leaderVerdict {
	return leaderVerdict{stale: true, reason: reason, message: fmt.Sprintf(format, args...)}
}

// notReadySince returns since when the pod has not been Ready; ready is true when it is Ready. A pod
// that has no Ready condition yet counts as not Ready since it was created.
func notReadySince(pod *corev1.Pod) (since time.Time, ready bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status == corev1.ConditionTrue {
				return time.Time{}, true
			}
			return c.LastTransitionTime.Time, false
		}
	}
	return pod.CreationTimestamp.Time, false
}

// canFence reports whether the partition's state epoch can still be raised. At sharestate.MaxStateEpoch
// it cannot: raising it would overflow the int32 the wire and the schema hold (semantics §9).
func canFence(obj *sharestatev1.SharePartitionState) bool {
	return obj.Status.StateEpoch < sharestate.MaxStateEpoch
}

// fence raises the partition's state epoch by one and clears its leader, so every later write from
// that leader is answered FENCED_STATE_EPOCH, and says why in the Fenced condition. A leader whose pod
// is gone is also kept as fencedLeader: the persister then refuses that pod's Reads at its old leader
// epoch, so a terminating broker cannot take the partition back by reading it again. The caller
// checks canFence first.
func fence(obj *sharestatev1.SharePartitionState, verdict leaderVerdict) {
	if verdict.podGone() && obj.Status.Leader != nil {
		fenced := *obj.Status.Leader
		obj.Status.FencedLeader = &fenced
	}
	obj.Status.StateEpoch++
	obj.Status.Leader = nil
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
		Type: sharestatev1.ConditionFenced, Status: metav1.ConditionTrue, Reason: verdict.reason,
		Message:            fmt.Sprintf("%s; state epoch raised to %d", verdict.message, obj.Status.StateEpoch),
		ObservedGeneration: obj.Generation,
	})
}

// setFenceRefused says in the Fenced condition that the stale leader could not be fenced, and what
// an administrator does about it.
func setFenceRefused(obj *sharestatev1.SharePartitionState, verdict leaderVerdict) {
	meta.SetStatusCondition(&obj.Status.Conditions, metav1.Condition{
		Type: sharestatev1.ConditionFenced, Status: metav1.ConditionFalse, Reason: sharestatev1.ReasonStateEpochExhausted,
		Message: fmt.Sprintf("%s, but the state epoch is at its maximum (%d) and cannot be raised to fence it; "+
			"delete the partition's state and initialize it again", verdict.message, obj.Status.StateEpoch),
		ObservedGeneration: obj.Generation,
	})
}

// setObservedConditions sets the conditions that follow from the object as it stands
// (SharePartitionState.SetObservedConditions). The persister sets them too, in the status it writes
// when it initializes the state or records a new leader, so the operator's write is then skipped as
// unchanged.
func setObservedConditions(obj *sharestatev1.SharePartitionState) { obj.SetObservedConditions() }
