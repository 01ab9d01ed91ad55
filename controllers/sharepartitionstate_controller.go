package controllers

import (
	"cmp"
	"context"
	"errors"
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
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// maxFenceAttempts bounds the conflicts one partition's fence absorbs before it hands the retry to
// the queue. A zombie leader that keeps writing moves the resourceVersion every round trip, and each
// attempt (a live read, then the patch conditional on it) wins only if no write lands in between: a
// few attempts can all lose, and the queue's back-off would then leave the zombie writing for longer.
const maxFenceAttempts = 16

// SharePartitionStateReconciler fences stale share-partition leaders: when the pod of a partition's
// recorded leader is gone (deleted, terminating, finished, replaced, or optionally not Ready for too
// long), it raises the partition's state epoch, so every later write from that leader is answered
// FENCED_STATE_EPOCH (semantics §9). It also reports Initialized and leader changes.
//
// It watches pods, not partitions: the persister rewrites a partition's status on every write, and
// none of those writes changes what this reconciler decides. A request is a pod; the partitions it
// leads are listed from the API server by the label the persister sets at each change of leader
// (sharestatev1.LabelLeaderPod), and each is decided on its status, the label being only a hint. What
// no pod event brings (a partition whose leader's pod went while the operator was down, a label the
// persister could not set or someone removed) the periodic resync finds (resync.go).
type SharePartitionStateReconciler struct {
	// Client reads pods from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: partitions always, and pods to confirm a verdict.
	APIReader client.Reader
	// Recorder emits Events.
	Recorder events.EventRecorder
	// NotReadyGrace, when above zero, also fences a leader whose pod has not been Ready for that long.
	NotReadyGrace time.Duration
	// MaxConcurrentReconciles is the number of partitions fenced at once.
	MaxConcurrentReconciles int
	// ResyncPeriod is how often every partition is looked at (default DefaultResyncPeriod).
	ResyncPeriod time.Duration
	// Namespaces are the namespaces the resync lists; empty: all.
	Namespaces []string
	// Clock tells the time (default the real clock; tests set a fake one, k8s.io/utils/clock/testing).
	Clock clock.PassiveClock
	// PartitionChanged, if set, is told of every status this reconciler wrote (a fence, a condition):
	// the ShareGroup reconciler, which watches no partition, then refreshes the group's status.
	PartitionChanged func(namespace string, group sharestatev1.GroupID)
	// Book records every partition as this reconciler last saw or wrote it (default: a book of its
	// own; the operator shares one with the ShareGroup reconciler).
	Book *PartitionBook

	gone        goneUIDs
	counts      countsOfLastPass
	fenceEvents eventCounter
	leaderEpoch sync.Map // types.NamespacedName → int32: the leader epoch last seen, to report changes
}

// SetupWithManager registers the reconciler, its watch of pods and its resync with the manager.
func (r *SharePartitionStateReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.MaxConcurrentReconciles <= 0 {
		r.MaxConcurrentReconciles = 1
	}
	if r.ResyncPeriod <= 0 {
		r.ResyncPeriod = DefaultResyncPeriod
	}
	if r.Book == nil {
		r.Book = NewPartitionBook()
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("sharepartitionstate").
		// A leader's pod going away is what fences it: the pod's request lists the partitions it leads.
		For(&corev1.Pod{}, builder.WithPredicates(podMayHaveGone(r.NotReadyGrace))).
		// A pod's partitions are fenced MaxConcurrentReconciles at a time within its request; two
		// workers let a second pod's fences start while the first's run.
		WithOptions(controller.Options{MaxConcurrentReconciles: 2}).
		Complete(r)
	if err != nil {
		return err
	}
	return mgr.Add(&partitionResync{r: r})
}

// sortInGroupOrder returns the partitions sorted by group id, topic id and partition. The API server
// returns them in the order of their names, which scatters a broker's partitions over all its groups:
// fenced in that order every one of those groups would change, and write its status, every
// partitionChangeDelay until the last fence (at 1,000 partitions in 20 groups, about 20 writes a
// second beside the fences). In group order the groups are fenced one after another, and each writes
// its status once or twice.
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

// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates,verbs=get;list;patch
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fences the partitions the pod leads, if it is gone, and keeps their conditions current.
func (r *SharePartitionStateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("pod", req.NamespacedName))
	pod, err := r.getPod(ctx, r.Client, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	partitions, err := r.partitionsLabelled(ctx, req.Namespace, req.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	recheck, err := r.reconcilePartitions(ctx, partitions)
	if err != nil {
		return ctrl.Result{}, err
	}
	// A pod not Ready within its grace is looked at again when the grace ends, whether or not it led
	// anything when this pass listed: a Read may record it as a leader meanwhile.
	if rest := r.graceLeft(pod); rest > 0 && (recheck == 0 || rest < recheck) {
		recheck = rest
	}
	return ctrl.Result{RequeueAfter: recheck}, nil
}

// graceLeft is how long the pod, not Ready, has until its grace period ends; 0 when it is Ready,
// gone, past its grace, or not-Ready leaders are not fenced.
func (r *SharePartitionStateReconciler) graceLeft(pod *corev1.Pod) time.Duration {
	if pod == nil || r.NotReadyGrace <= 0 {
		return 0
	}
	since, ready := notReadySince(pod)
	if ready {
		return 0
	}
	return max(0, r.NotReadyGrace-r.Clock.Now().Sub(since))
}

// listPageSize bounds the partitions one List returns: a broker may lead thousands, each with up to
// 10,000 batches.
const listPageSize = 500

// partitionsLabelled lists, from the API server, the partitions labelled as led by the pod.
func (r *SharePartitionStateReconciler) partitionsLabelled(ctx context.Context, namespace, podName string) ([]sharestatev1.SharePartitionState, error) {
	var all []sharestatev1.SharePartitionState
	err := listPages(ctx, r.APIReader, namespace, func(page []sharestatev1.SharePartitionState) error {
		all = append(all, page...)
		return nil
	}, client.MatchingLabels{sharestatev1.LabelLeaderPod: sharestatev1.LeaderPodLabelValue(podName)})
	if err != nil {
		return nil, fmt.Errorf("listing the partitions pod %s/%s leads: %w", namespace, podName, err)
	}
	return all, nil
}

// listPages lists the partitions of namespace ("" for all) from reader a page at a time, and hands
// each page to visit, without the partitions' state batches (dropStateBatches).
func listPages(ctx context.Context, reader client.Reader, namespace string, visit func([]sharestatev1.SharePartitionState) error, opts ...client.ListOption) error {
	opts = append([]client.ListOption{client.InNamespace(namespace), client.Limit(listPageSize)}, opts...) // the caller's win
	for token := ""; ; {
		var page sharestatev1.SharePartitionStateList
		if err := reader.List(ctx, &page, append(opts, client.Continue(token))...); err != nil {
			return err
		}
		for i := range page.Items {
			dropStateBatches(&page.Items[i])
		}
		if err := visit(page.Items); err != nil {
			return err
		}
		if token = page.Continue; token == "" {
			return nil
		}
	}
}

// reconcilePartitions reconciles the partitions, MaxConcurrentReconciles at a time, in group order.
// It returns the earliest recheck any of them asked for, and their errors.
func (r *SharePartitionStateReconciler) reconcilePartitions(ctx context.Context, items []sharestatev1.SharePartitionState) (time.Duration, error) {
	sorted := sortInGroupOrder(items)
	var (
		mu      sync.Mutex
		recheck time.Duration
		errs    []error
		next    = make(chan *sharestatev1.SharePartitionState)
		wg      sync.WaitGroup
	)
	for range min(r.MaxConcurrentReconciles, len(sorted)) {
		wg.Go(func() {
			for obj := range next {
				after, err := r.reconcilePartition(ctx, obj)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				if after > 0 && (recheck == 0 || after < recheck) {
					recheck = after
				}
				mu.Unlock()
			}
		})
	}
	for _, obj := range sorted {
		next <- obj
	}
	close(next)
	wg.Wait()
	return recheck, errors.Join(errs...)
}

// reconcilePartition fences the partition if its recorded leader is stale, keeps its conditions
// current and its leader-pod label in line with its status. obj is the partition as just read from
// the API server; it is changed to what was written. It returns when to look again (a not-Ready
// leader's grace end), if ever.
func (r *SharePartitionStateReconciler) reconcilePartition(ctx context.Context, obj *sharestatev1.SharePartitionState) (time.Duration, error) {
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("sharePartitionState", klog.KObj(obj), "group", obj.Spec.GroupID, "partition", obj.Spec.Partition))
	key := client.ObjectKeyFromObject(obj)
	r.reportLeaderChange(key, obj)
	for attempt := 1; ; attempt++ {
		verdict, err := r.judge(ctx, obj)
		if err != nil {
			return 0, err
		}
		err = r.writeStatus(ctx, obj, verdict)
		if err == nil {
			err = r.repairLabel(ctx, obj)
			r.Book.record(obj)
			return verdict.recheckAfter, err
		}
		if !apierrors.IsConflict(err) || attempt == maxFenceAttempts {
			return 0, err
		}
		// The object moved (a write, a Read by a new leader): decide again on the object as it is now.
		if err := r.APIReader.Get(ctx, key, obj); err != nil {
			if apierrors.IsNotFound(err) {
				r.leaderEpoch.Delete(key)
			}
			return 0, client.IgnoreNotFound(err)
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
	// The group's pass comes partitionChangeDelay later: by then reconcilePartition has recorded obj.
	if r.PartitionChanged != nil {
		r.PartitionChanged(obj.Namespace, obj.Spec.GroupID)
	}
	return nil
}

// repairLabel sets the partition's leader-pod label to what its status says, when the persister did
// not (an older persister, a label patch that failed or never came) or someone changed it: status
// decides, and the label only lets a pod's request find the partition. A partition without a leader
// keeps the label it has, or gets an empty one. The patch is conditional on obj's resourceVersion: a
// conflict means a persister wrote since, and the next resync looks again.
func (r *SharePartitionStateReconciler) repairLabel(ctx context.Context, obj *sharestatev1.SharePartitionState) error {
	want, ok := wantedLeaderLabel(obj)
	if ok {
		return nil
	}
	labelled := obj.DeepCopy()
	if labelled.Labels == nil {
		labelled.Labels = map[string]string{}
	}
	labelled.Labels[sharestatev1.LabelLeaderPod] = want
	err := r.Client.Patch(ctx, labelled, client.MergeFromWithOptions(obj, client.MergeFromWithOptimisticLock{}))
	switch {
	case err == nil:
		labelsRepairedTotal.Inc()
		ctrl.LoggerFrom(ctx).V(1).Info("Repaired leader-pod label", "label", want)
		*obj = *labelled
		return nil
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return nil
	default:
		return fmt.Errorf("labelling %s with its leader's pod: %w", klog.KObj(obj), err)
	}
}

// wantedLeaderLabel returns the leader-pod label the partition's status calls for, and whether the
// partition already has it: its leader's pod when it has a leader, else any value, empty when it has
// none at all.
func wantedLeaderLabel(obj *sharestatev1.SharePartitionState) (string, bool) {
	got, labelled := obj.Labels[sharestatev1.LabelLeaderPod]
	if l := obj.Status.Leader; l != nil && l.PodName != "" {
		want := sharestatev1.LeaderPodLabelValue(l.PodName)
		return want, labelled && got == want
	}
	return "", labelled
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
	verdict := judgeLeader(leader, cached, r.Clock.Now(), r.NotReadyGrace)
	if !verdict.stale {
		return verdict, nil
	}
	live, err := r.getPod(ctx, r.APIReader, key)
	if err != nil {
		return leaderVerdict{}, err
	}
	verdict = judgeLeader(leader, live, r.Clock.Now(), r.NotReadyGrace)
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

// reportLeaderChange emits an Event when a new leader took the partition with a higher leader epoch
// than the one last seen. A partition seen for the first time is reported only when it has a leader
// and is still marked Fenced: a leader took it since a fence this operator did not see undone.
func (r *SharePartitionStateReconciler) reportLeaderChange(key types.NamespacedName, obj *sharestatev1.SharePartitionState) {
	previous, seen := r.leaderEpoch.Swap(key, obj.Status.LeaderEpoch)
	l := obj.Status.Leader
	switch {
	case l == nil:
		return
	case seen && obj.Status.LeaderEpoch > previous.(int32):
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, sharestatev1.EventReasonLeaderChanged, "Read",
			"broker %d (pod %s) leads at leader epoch %d, fencing leader epoch %d", l.BrokerID, l.PodName, obj.Status.LeaderEpoch, previous)
	case !seen && meta.IsStatusConditionTrue(obj.Status.Conditions, sharestatev1.ConditionFenced):
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, sharestatev1.EventReasonLeaderChanged, "Read",
			"broker %d (pod %s) leads at leader epoch %d, after the partition was fenced", l.BrokerID, l.PodName, obj.Status.LeaderEpoch)
	}
}

// goneUIDs remembers the pods (by UID) the API server confirmed gone, with the verdict: the
// maxGoneUIDs most recently used. Forgetting one only costs a live read.
type goneUIDs struct {
	mu    sync.Mutex
	cache *lru.Cache // of string → leaderVerdict; made at first use
}

const maxGoneUIDs = 4096

func (g *goneUIDs) get(uid string) (leaderVerdict, bool) {
	if uid == "" {
		return leaderVerdict{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cache == nil {
		return leaderVerdict{}, false
	}
	v, ok := g.cache.Get(uid)
	if !ok {
		return leaderVerdict{}, false
	}
	return v.(leaderVerdict), true
}

func (g *goneUIDs) add(uid string, v leaderVerdict) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cache == nil {
		g.cache = lru.New(maxGoneUIDs)
	}
	g.cache.Add(uid, v)
}

// eventsPerLeader is how many fences of one leader's partitions are reported as separate events.
const eventsPerLeader = 10

// eventCounter counts events by key, for the maxGoneUIDs keys most recently counted: a key forgotten
// counts from 1 again, which only reports a few more events.
type eventCounter struct {
	mu    sync.Mutex
	cache *lru.Cache // of string → int; made at first use
}

func (c *eventCounter) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cache == nil {
		c.cache = lru.New(maxGoneUIDs)
	}
	n := 1
	if v, ok := c.cache.Get(key); ok {
		n += v.(int)
	}
	c.cache.Add(key, n)
	return n
}
