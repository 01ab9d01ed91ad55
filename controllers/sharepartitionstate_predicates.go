package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// partitionLeadershipChanged passes a SharePartitionState update only when the leader, the epochs,
// the initialization or the spec changed: the persister's ordinary writes (batches, start offset,
// delivery-complete count, write time and count) do not change whether the partition must be fenced,
// and would otherwise reconcile it on every acknowledgement. The leader epoch stays in: the leader
// change event reports it, and the persister raises it only with a new leader recorded. The operator's
// own writes (conditions, observedGeneration) pass only when they fence. The group's totals, which do
// follow every write, are refreshed on a timer (ShareGroupReconciler.TotalsRefresh) instead.
func partitionLeadershipChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldObj, okOld := e.ObjectOld.(*sharestatev1.SharePartitionState)
			newObj, okNew := e.ObjectNew.(*sharestatev1.SharePartitionState)
			if !okOld || !okNew {
				return true
			}
			o, n := oldObj.Status, newObj.Status
			return oldObj.Generation != newObj.Generation ||
				o.StateEpoch != n.StateEpoch || o.LeaderEpoch != n.LeaderEpoch ||
				!equality.Semantic.DeepEqual(o.Leader, n.Leader) ||
				(o.CreateTime == nil) != (n.CreateTime == nil) || !o.CreateTime.Equal(n.CreateTime)
		},
	}
}

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
