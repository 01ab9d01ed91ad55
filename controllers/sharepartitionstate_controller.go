package controllers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// leaderPodIndex indexes SharePartitionStates by the name of their recorded leader's pod, so a pod
// event finds the partitions it leads without listing every partition.
const leaderPodIndex = "status.leader.podName"

// maxFenceAttempts bounds the conflicts one reconcile absorbs before it hands the retry to the queue.
// A zombie leader that keeps writing moves the resourceVersion every round trip, and each attempt
// (a live read, then the patch conditional on it) wins only if no write lands in between: a few
// attempts can all lose, and the queue's back-off would then leave the zombie writing for longer.
const maxFenceAttempts = 16

// SharePartitionStateReconciler fences stale share-partition leaders: when the pod of a partition's
// recorded leader is gone (deleted, terminating, finished, replaced, or optionally not Ready for too
// long), it raises the partition's state epoch, so every later write from that leader is answered
// FENCED_STATE_EPOCH (semantics §9). It also reports Initialized and leader changes.
type SharePartitionStateReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: a fence is never decided on the cache alone.
	APIReader client.Reader
	// Recorder emits Events.
	Recorder events.EventRecorder
	// NotReadyGrace, when above zero, also fences a leader whose pod has not been Ready for that long.
	NotReadyGrace time.Duration
	// MaxConcurrentReconciles is the number of workers.
	MaxConcurrentReconciles int
	// Now returns the current time (default time.Now).
	Now func() time.Time

	gone        goneUIDs
	fenceEvents eventCounter
	leaderEpoch sync.Map // types.NamespacedName → int32: the leader epoch last seen, to report changes
}

// SetupWithManager registers the reconciler, its index and its watches with the manager.
func (r *SharePartitionStateReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &sharestatev1.SharePartitionState{}, leaderPodIndex, indexLeaderPod); err != nil {
		return fmt.Errorf("indexing SharePartitionStates by leader pod: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sharepartitionstate").
		// The persister rewrites status on every write; only a change of leader, of the epochs or of
		// initialization can change what this reconciler decides.
		For(&sharestatev1.SharePartitionState{}, builder.WithPredicates(partitionLeadershipChanged())).
		// A leader's pod going away is what fences it; the index maps the pod to the partitions it leads.
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.partitionsLedBy),
			builder.WithPredicates(podLivenessChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
}

func indexLeaderPod(o client.Object) []string {
	sps, ok := o.(*sharestatev1.SharePartitionState)
	if !ok || sps.Status.Leader == nil || sps.Status.Leader.PodName == "" {
		return nil
	}
	return []string{sps.Status.Leader.PodName}
}

// partitionsLedBy maps a pod to the partitions whose recorded leader it is (same namespace), in the
// order of their group, topic and partition (partitionsInGroupOrder).
func (r *SharePartitionStateReconciler) partitionsLedBy(ctx context.Context, pod client.Object) []ctrl.Request {
	var list sharestatev1.SharePartitionStateList
	if err := r.Client.List(ctx, &list, client.InNamespace(pod.GetNamespace()), client.MatchingFields{leaderPodIndex: pod.GetName()},
		client.UnsafeDisableDeepCopy); err != nil { // only their keys and names are read
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the partitions a pod leads", "pod", klog.KObj(pod))
		return nil
	}
	return partitionsInGroupOrder(list.Items)
}

// partitionsInGroupOrder returns the requests of the partitions sorted by group id, topic id and
// partition. The queue hands requests to the workers in the order they were added, and the cache's
// index returns its objects in no order: a broker's death would fence its partitions scattered over
// all its groups, and every one of those groups would change, and write its status, every
// partitionChangeDelay until the last fence (at 1,000 partitions in 20 groups, about 20 writes a
// second beside the fences). In group order the groups are fenced one after another, and each writes
// its status once or twice.
func partitionsInGroupOrder(items []sharestatev1.SharePartitionState) []ctrl.Request {
	sorted := make([]*sharestatev1.SharePartitionState, len(items))
	for i := range items {
		sorted[i] = &items[i]
	}
	slices.SortFunc(sorted, func(a, b *sharestatev1.SharePartitionState) int {
		return cmp.Or(cmp.Compare(a.Spec.GroupID, b.Spec.GroupID), cmp.Compare(a.Spec.TopicID, b.Spec.TopicID),
			cmp.Compare(a.Spec.Partition, b.Spec.Partition), cmp.Compare(a.Name, b.Name))
	})
	requests := make([]ctrl.Request, len(sorted))
	for i, sps := range sorted {
		requests[i] = ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sps)}
	}
	return requests
}

// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates,verbs=get;list;watch
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fences the partition if its recorded leader is stale, and keeps its conditions current.
func (r *SharePartitionStateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := &sharestatev1.SharePartitionState{}
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.leaderEpoch.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("group", obj.Spec.GroupID, "partition", obj.Spec.Partition)
	ctx = ctrl.LoggerInto(ctx, log)
	r.reportLeaderChange(req.NamespacedName, obj)

	for attempt := 1; ; attempt++ {
		verdict, err := r.judge(ctx, obj)
		if err != nil {
			return ctrl.Result{}, err
		}
		err = r.writeStatus(ctx, obj, verdict)
		if err == nil {
			return ctrl.Result{RequeueAfter: verdict.recheckAfter}, nil
		}
		if !apierrors.IsConflict(err) || attempt == maxFenceAttempts {
			return ctrl.Result{}, err
		}
		// The object moved (a write, a Read by a new leader): decide again on the object as it is now.
		if err := r.APIReader.Get(ctx, req.NamespacedName, obj); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
}

// writeStatus fences the partition when the verdict says so and sets its conditions, in one status
// write conditional on the resourceVersion obj was read at, and only when something changed.
//
// The write is a merge patch of what changed, carrying obj's resourceVersion: the operator owns the
// conditions, observedGeneration and, when it fences, stateEpoch, leader and fencedLeader. It never
// sends the persister's fields as it happens to hold them, so an object the persister has created but
// not yet initialized keeps no start offset of the operator's making.
func (r *SharePartitionStateReconciler) writeStatus(ctx context.Context, obj *sharestatev1.SharePartitionState, verdict leaderVerdict) error {
	updated := obj.DeepCopy()
	exhausted := verdict.stale && !canFence(obj)
	if verdict.stale && !exhausted {
		fence(updated, verdict)
	}
	setObservedConditions(updated)
	if exhausted {
		setFenceRefused(updated, verdict)
	}
	if equality.Semantic.DeepEqual(obj.Status, updated.Status) {
		return nil
	}
	patch := client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, updated, patch); err != nil {
		return fmt.Errorf("patching the status of %s: %w", klog.KObj(obj), err)
	}
	switch {
	case exhausted:
		r.reportFenceRefused(ctx, obj, updated, verdict)
	case verdict.stale:
		fencesTotal.WithLabelValues(verdict.reason).Inc()
		ctrl.LoggerFrom(ctx).Info("Fenced stale leader", "reason", verdict.reason, "stateEpoch", updated.Status.StateEpoch, "detail", verdict.message)
		r.reportFence(obj.Status.Leader, updated, verdict)
	}
	*obj = *updated
	return nil
}

// reportFenceRefused reports, once per change of the condition, a stale leader that cannot be fenced
// because the state epoch is at its maximum.
func (r *SharePartitionStateReconciler) reportFenceRefused(ctx context.Context, before, after *sharestatev1.SharePartitionState, verdict leaderVerdict) {
	old := meta.FindStatusCondition(before.Status.Conditions, sharestatev1.ConditionFenced)
	if old != nil && old.Reason == sharestatev1.ReasonStateEpochExhausted {
		return
	}
	fencesRefusedTotal.WithLabelValues(sharestatev1.ReasonStateEpochExhausted).Inc()
	c := meta.FindStatusCondition(after.Status.Conditions, sharestatev1.ConditionFenced)
	ctrl.LoggerFrom(ctx).Info("Could not fence stale leader", "reason", verdict.reason, "stateEpoch", after.Status.StateEpoch, "detail", c.Message)
	r.Recorder.Eventf(after, nil, corev1.EventTypeWarning, sharestatev1.EventReasonFenceRefused, "Fence", "%s", c.Message)
}

// judge decides whether the partition's recorded leader is stale. A stale verdict from the cache is
// confirmed by reading the pod from the API server, unless that pod's UID is already known to be gone.
func (r *SharePartitionStateReconciler) judge(ctx context.Context, obj *sharestatev1.SharePartitionState) (leaderVerdict, error) {
	leader := obj.Status.Leader
	if leader == nil || leader.PodName == "" {
		return leaderVerdict{}, nil
	}
	if verdict, ok := r.gone.get(leader.PodUID); ok {
		return verdict, nil
	}
	key := types.NamespacedName{Namespace: obj.Namespace, Name: leader.PodName}
	cached, err := r.getPod(ctx, r.Client, key)
	if err != nil {
		return leaderVerdict{}, err
	}
	verdict := judgeLeader(leader, cached, r.Now(), r.NotReadyGrace)
	if !verdict.stale {
		return verdict, nil
	}
	live, err := r.getPod(ctx, r.APIReader, key)
	if err != nil {
		return leaderVerdict{}, err
	}
	verdict = judgeLeader(leader, live, r.Now(), r.NotReadyGrace)
	if verdict.podGone() && leader.PodUID != "" {
		// Deleted, terminating, finished and replaced pods never come back under the same UID: the
		// partitions this pod still leads need no further live read.
		r.gone.add(leader.PodUID, verdict)
	}
	return verdict, nil
}

// getPod reads a pod; nil when it does not exist.
func (r *SharePartitionStateReconciler) getPod(ctx context.Context, reader client.Reader, key types.NamespacedName) (*corev1.Pod, error) {
	pod := &corev1.Pod{}
	if err := reader.Get(ctx, key, pod); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading pod %s: %w", key, err)
	}
	return pod, nil
}

// reportFence emits the Fenced event of a partition. A broker's death fences all its partitions at
// once; like the API server's own event correlator, the reconciler then reports the first
// eventsPerLeader of them one by one and says, once, that it stops there. Every fence still shows in
// the partition's Fenced condition and in sharestate_operator_fences_total.
func (r *SharePartitionStateReconciler) reportFence(leader *sharestatev1.LeaderRef, fenced *sharestatev1.SharePartitionState, verdict leaderVerdict) {
	switch n := r.fenceEvents.count(leaderKey(leader)); {
	case n <= eventsPerLeader:
		r.Recorder.Eventf(fenced, nil, corev1.EventTypeWarning, sharestatev1.EventReasonFenced, "Fence",
			"%s; state epoch raised to %d", verdict.message, fenced.Status.StateEpoch)
	case n == eventsPerLeader+1:
		r.Recorder.Eventf(fenced, nil, corev1.EventTypeWarning, sharestatev1.EventReasonFenced, "Fence",
			"%s; state epoch raised to %d. More partitions of this leader are being fenced: their fences "+
				"show in their Fenced conditions, not as events", verdict.message, fenced.Status.StateEpoch)
	}
}

func leaderKey(l *sharestatev1.LeaderRef) string {
	if l.PodUID != "" {
		return l.PodUID
	}
	return l.PodName
}

// reportLeaderChange emits an Event when a new leader took the partition with a higher leader epoch.
func (r *SharePartitionStateReconciler) reportLeaderChange(key types.NamespacedName, obj *sharestatev1.SharePartitionState) {
	previous, seen := r.leaderEpoch.Swap(key, obj.Status.LeaderEpoch)
	if !seen || obj.Status.Leader == nil || obj.Status.LeaderEpoch <= previous.(int32) {
		return
	}
	l := obj.Status.Leader
	r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, sharestatev1.EventReasonLeaderChanged, "Read",
		"broker %d (pod %s) leads at leader epoch %d, fencing leader epoch %d", l.BrokerID, l.PodName, obj.Status.LeaderEpoch, previous)
}

// goneUIDs remembers, up to a bound, the pods (by UID) the API server confirmed gone, with the verdict.
type goneUIDs struct {
	mu   sync.Mutex
	uids map[string]leaderVerdict
}

const maxGoneUIDs = 4096

func (g *goneUIDs) get(uid string) (leaderVerdict, bool) {
	if uid == "" {
		return leaderVerdict{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	v, ok := g.uids[uid]
	return v, ok
}

func (g *goneUIDs) add(uid string, v leaderVerdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.uids == nil || len(g.uids) >= maxGoneUIDs {
		g.uids = map[string]leaderVerdict{} // forgetting only costs a live read
	}
	g.uids[uid] = v
}

// eventsPerLeader is how many fences of one leader's partitions are reported as separate events.
const eventsPerLeader = 10

// eventCounter counts events by key, up to a bound on the keys.
type eventCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *eventCounter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil || len(c.counts) >= maxGoneUIDs {
		c.counts = map[string]int{}
	}
	c.counts[key]++
	return c.counts[key]
}
