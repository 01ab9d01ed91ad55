package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// podMayHaveGone passes the pod events after which the pod may no longer lead what it led, and
// only those: each one costs a List of the partitions labelled with the pod at the API server, and
// every pod of the cluster is created, changed and deleted through this watch. A live pod's own
// creation passes only when it is terminating, finished or (with notReadyGrace) not Ready already:
// the manager's start creates every pod at once, and what happened to a pod while the operator was
// down is the resync's to find. An update passes when the pod was replaced under its name (another
// UID) or turned terminating, finished or not Ready; a deletion always passes.
func podMayHaveGone(notReadyGrace time.Duration) predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool {
			pod, ok := e.Object.(*corev1.Pod)
			return !ok || mayNotLead(pod, notReadyGrace)
		},
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			newPod, okNew := e.ObjectNew.(*corev1.Pod)
			if !okOld || !okNew {
				return true
			}
			return oldPod.UID != newPod.UID || !mayNotLead(oldPod, notReadyGrace) && mayNotLead(newPod, notReadyGrace)
		},
	}
}

// mayNotLead reports a pod that is terminating, finished or, with notReadyGrace, not Ready: the
// partitions it leads may have to be fenced, now or at the end of the grace.
func mayNotLead(pod *corev1.Pod, notReadyGrace time.Duration) bool {
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return true
	}
	if notReadyGrace <= 0 {
		return false
	}
	_, ready := notReadySince(pod)
	return !ready
}
