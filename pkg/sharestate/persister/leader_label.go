package persister

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// The operator finds the partitions a pod leads by the label sharestatev1.LabelLeaderPod, without
// watching the partitions (docs/architecture.md, Fencing). Labels are metadata, which a status update
// leaves as they are: so when the persister records a leader on another pod, it sets the label in a
// patch of its own, after the status write and conditional on the resourceVersion that write returned.
// The patch happens only at a change of the leader's pod, never in a steady state of Writes.
//
// A label patch that fails, or a persister that stops between the two writes, leaves the label
// behind the status: the operator's periodic resync repairs it (and fences by status meanwhile). A
// conditional patch keeps a slow persister from labelling a partition with a leader that another
// Read has replaced since: on a conflict the object is read again and labelled as it then stands.

// maxLabelAttempts bounds the conflicts a label patch absorbs; the resync repairs what is left.
const maxLabelAttempts = 3

// leaderLabelWanted returns the label value the object's recorded leader wants, and whether the
// object's labels lack it. An object without a leader wants nothing: it keeps the label it has.
func leaderLabelWanted(obj *sharestatev1.SharePartitionState) (string, bool) {
	l := obj.Status.Leader
	if l == nil || l.PodName == "" {
		return "", false
	}
	want := sharestatev1.LeaderPodLabelValue(l.PodName)
	got, ok := obj.Labels[sharestatev1.LabelLeaderPod]
	return want, !ok || got != want
}

// labelLeader sets the object's leader-pod label to its recorded leader's pod, when it differs, and
// returns the object as last seen (patched, or read again: nil once deleted), or obj when nothing was
// done or the patch failed: the label is a hint, so its failure fails no operation.
func (p *Persister) labelLeader(ctx context.Context, c client.Client, key partitionKey, obj *sharestatev1.SharePartitionState) *sharestatev1.SharePartitionState {
	for attempt := 1; obj != nil && !p.patchForbidden.Load(); attempt++ {
		want, needed := leaderLabelWanted(obj)
		if !needed {
			return obj
		}
		labelled := obj.DeepCopy()
		if labelled.Labels == nil {
			labelled.Labels = map[string]string{}
		}
		labelled.Labels[sharestatev1.LabelLeaderPod] = want
		reqCtx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
		err := c.Patch(reqCtx, labelled, client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{}))
		cancel()
		p.apiRequest("patch", err)
		switch {
		case err == nil:
			return labelled
		case apierrors.IsConflict(err) && attempt < maxLabelAttempts:
			fresh, err := p.getObject(ctx, c, key)
			if err != nil {
				return obj
			}
			obj = fresh
		case apierrors.IsForbidden(err):
			if p.patchForbidden.CompareAndSwap(false, true) {
				p.log.Info("Not patching SharePartitionStates: the role lacks patch on them; every write pays the API server's field "+
					"tracking, and the operator finds their leaders by its periodic resync only", "namespace", p.opts.Namespace, "error", err.Error())
			}
			return obj
		default:
			p.log.V(1).Info("Could not label a SharePartitionState with its leader's pod", "name", obj.Name, "error", err.Error())
			return obj
		}
	}
	return obj
}
