package controllers

import (
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

// podLivenessChanged passes a pod update only when something that decides whether its broker still
// leads changed: its UID, deletion, phase or readiness.
func podLivenessChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			newPod, okNew := e.ObjectNew.(*corev1.Pod)
			if !okOld || !okNew {
				return true
			}
			_, oldReady := notReadySince(oldPod)
			_, newReady := notReadySince(newPod)
			return oldPod.UID != newPod.UID ||
				(oldPod.DeletionTimestamp == nil) != (newPod.DeletionTimestamp == nil) ||
				oldPod.Status.Phase != newPod.Status.Phase || oldReady != newReady
		},
	}
}
