package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
)

// leaderPodReconciler turns the end of a pod into requests of the SharePartitionState reconciler: a
// request is a pod that may no longer lead what it led (podMayHaveGone), and its reconcile lists the
// partitions labelled with that pod (sharestatev1.LabelLeaderPod) from the API server and asks for a
// reconcile of each, in group order, handing over the partition as listed. It decides and writes
// nothing itself: the partitions' reconciles decide on each one's status, which says who leads.
type leaderPodReconciler struct {
	partitions *SharePartitionStateReconciler
}

func (p *leaderPodReconciler) setupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("leader-pod").
		For(&corev1.Pod{}, builder.WithPredicates(podMayHaveGone(p.partitions.NotReadyGrace))).
		Complete(p)
}

// Reconcile asks for a reconcile of every partition the pod is labelled as leading. A pod not Ready
// within its grace is looked at again when the grace ends, whether or not it led anything when this
// pass listed: a Read may record it as a leader meanwhile.
func (p *leaderPodReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r := p.partitions
	pod, err := r.getPod(ctx, r.Client, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	listed := r.Clock.Now()
	led, err := p.partitionsLabelled(ctx, req.Namespace, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, partition := range sortInGroupOrder(led) {
		// A pod's end comes in two events (terminating, then deleted), the second often while the
		// first's fences run: a partition fenced since this List began needs nothing more from this
		// pod, and its copy, older than the fence, would only make the write conflict.
		if r.fencedSince(client.ObjectKeyFromObject(partition), listed) {
			continue
		}
		if err := r.request(ctx, partition); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: r.graceLeft(pod)}, nil
}

// partitionsLabelled lists, from the API server, the partitions labelled as led by the pod, a page at
// a time and without their state batches.
func (p *leaderPodReconciler) partitionsLabelled(ctx context.Context, namespace, podName string) ([]sharestatev1.SharePartitionState, error) {
	var all []sharestatev1.SharePartitionState
	err := partitionbook.ListPages(ctx, p.partitions.APIReader, namespace, func(page []sharestatev1.SharePartitionState) error {
		all = append(all, page...)
		return nil
	}, client.MatchingLabels{sharestatev1.LabelLeaderPod: sharestatev1.LeaderPodLabelValue(podName)})
	if err != nil {
		return nil, fmt.Errorf("listing the partitions pod %s/%s leads: %w", namespace, podName, err)
	}
	return all, nil
}

// sortInGroupOrder returns the partitions sorted by group id, topic id and partition. The API server
// returns them in the order of their names, which scatters a broker's partitions over all its groups:
// fenced in that order every one of those groups would change, and write its status, every
// partitionChangeDelay until the last fence (at 1,000 partitions in 20 groups, about 20 writes a
// second beside the fences). In group order the groups are fenced one after another, and each writes
// its status once or twice: the work queue hands out requests of one priority in the order they came
// (controller-runtime v0.25.2, pkg/controller/priorityqueue, lessReady).
func sortInGroupOrder(items []sharestatev1.SharePartitionState) []*sharestatev1.SharePartitionState {
	sorted := make([]*sharestatev1.SharePartitionState, len(items))
	for i := range items {
		sorted[i] = &items[i]
	}
	slices.SortFunc(sorted, func(a, b *sharestatev1.SharePartitionState) int {
		return cmp.Or(cmp.Compare(a.Spec.GroupID, b.Spec.GroupID), cmp.Compare(a.Spec.TopicID, b.Spec.TopicID),
			cmp.Compare(a.Spec.Partition, b.Spec.Partition), cmp.Compare(a.Name, b.Name))
	})
	return sorted
}
