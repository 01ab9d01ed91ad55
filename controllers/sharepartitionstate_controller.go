package controllers

import (
	"context"
	"fmt"
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
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
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
// A request is one SharePartitionState, read from the API server, decided on its status and written
// conditional on the resourceVersion it was read at; MaxConcurrentReconciles of them run at once. It
// watches no partition: the persister rewrites a partition's status on every write, and none of those
// writes changes what this reconciler decides. Two things bring a partition here instead: the end of
// its leader's pod, which the leader-pod reconciler turns into a request for each partition labelled
// with that pod (leaderpod_controller.go), and the periodic resync, which asks for each partition
// whose look it finds would change something (partitionbook.Resync, look). The label is only a hint:
// status decides.
type SharePartitionStateReconciler struct {
	// Client reads pods from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server: partitions always, and pods to confirm a verdict.
	APIReader client.Reader
	// Recorder emits Events.
	Recorder events.EventRecorder
	// NotReadyGrace, when above zero, also fences a leader whose pod has not been Ready for that long.
	NotReadyGrace time.Duration
	// MaxConcurrentReconciles is the number of partitions reconciled (fenced) at once.
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
	Book *partitionbook.Book

	requests    chan event.GenericEvent // partitions to reconcile, from the leader-pod reconciler and the resync
	listed      sync.Map                // types.NamespacedName → *SharePartitionState: as its requester listed it
	fencedAt    sync.Map                // types.NamespacedName → time.Time: when this operator last fenced it
	gone        goneUIDs
	counts      countsOfLastPass
	fenceEvents eventCounter
	leaderEpoch sync.Map // types.NamespacedName → int32: the leader epoch last seen, to report changes
}

// requestsBuffer is how many partition requests wait to enter the work queue: the queue takes them as
// fast as they come, so the buffer only smooths a burst (a pod's thousand partitions).
const requestsBuffer = 1024

// SetupWithManager registers the reconciler, the leader-pod reconciler that feeds it and the resync
// with the manager.
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
		r.Book = partitionbook.New()
	}
	r.requests = make(chan event.GenericEvent, requestsBuffer)
	err := ctrl.NewControllerManagedBy(mgr).
		Named("sharepartitionstate").
		WatchesRawSource(source.Channel(r.requests, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: r.MaxConcurrentReconciles}).
		Complete(r)
	if err != nil {
		return err
	}
	if err := (&leaderPodReconciler{partitions: r}).setupWithManager(mgr); err != nil {
		return err
	}
	return mgr.Add(&partitionbook.Resync{
		Reader: r.APIReader, Namespaces: r.Namespaces, Period: r.ResyncPeriod, Clock: r.Clock, Book: r.Book,
		Look: r.look, Passed: r.passed,
	})
}

// request asks for a reconcile of the partition, as just listed from the API server. Its reconcile
// starts from that copy rather than reading the partition again: a pod's end reconciles all its
// partitions, and a second read of each would cost as many requests. The copy may be stale by then;
// the write is conditional on its resourceVersion, and a conflict reads the partition live (as any
// conflict does). The work queue takes a partition asked for twice before its reconcile once, and
// never reconciles one partition in two workers at once.
func (r *SharePartitionStateReconciler) request(ctx context.Context, obj *sharestatev1.SharePartitionState) error {
	r.listed.Store(client.ObjectKeyFromObject(obj), obj)
	select {
	case r.requests <- event.GenericEvent{Object: obj}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fencedSince reports whether this operator fenced the partition at or after the moment since: a
// decision on a state at least as new as one listed then.
func (r *SharePartitionStateReconciler) fencedSince(key types.NamespacedName, since time.Time) bool {
	at, ok := r.fencedAt.Load(key)
	return ok && !at.(time.Time).Before(since)
}

// current returns the partition as listed by its requester, or else as read from the API server now;
// nil when it does not exist.
func (r *SharePartitionStateReconciler) current(ctx context.Context, key types.NamespacedName) (*sharestatev1.SharePartitionState, error) {
	if listed, ok := r.listed.LoadAndDelete(key); ok {
		return listed.(*sharestatev1.SharePartitionState), nil
	}
	obj := &sharestatev1.SharePartitionState{}
	if err := r.APIReader.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s: %w", key, err)
	}
	partitionbook.DropStateBatches(obj)
	return obj, nil
}

// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates,verbs=get;list;patch
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fences the partition, if its recorded leader is gone, and keeps its conditions and its
// leader-pod label current. A partition whose leader is within its not-Ready grace is looked at again
// when the grace ends.
func (r *SharePartitionStateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj, err := r.current(ctx, req.NamespacedName)
	if err != nil {
		return ctrl.Result{}, err
	}
	if obj == nil {
		r.leaderEpoch.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	recheck, err := r.reconcilePartition(ctx, obj)
	if err != nil {
		return ctrl.Result{}, err
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
			r.Book.Record(obj)
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
	updated, exhausted := plannedStatus(obj, verdict)
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
		r.fencedAt.Store(client.ObjectKeyFromObject(obj), r.Clock.Now())
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

// plannedStatus returns the partition as the verdict wants it: fenced when its leader is stale and
// its state epoch can still be raised, with its conditions set from its status. exhausted says the
// leader is stale and the state epoch at its maximum.
func plannedStatus(obj *sharestatev1.SharePartitionState, verdict leaderVerdict) (planned *sharestatev1.SharePartitionState, exhausted bool) {
	planned = obj.DeepCopy()
	exhausted = verdict.stale && !canFence(obj)
	if verdict.stale && !exhausted {
		fence(planned, verdict)
	}
	setObservedConditions(planned)
	if exhausted {
		setFenceRefused(planned, verdict)
	}
	return planned, exhausted
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
	verdict, confirmed, err := r.cachedVerdict(ctx, obj)
	if err != nil || confirmed || !verdict.stale {
		return verdict, err
	}
	leader := obj.Status.Leader
	live, err := r.getPod(ctx, r.APIReader, types.NamespacedName{Namespace: obj.Namespace, Name: leader.PodName})
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

// cachedVerdict decides whether the partition's recorded leader is stale without a request to the API
// server: from the pods known gone (confirmed), else from the cached pod (to be confirmed when stale).
func (r *SharePartitionStateReconciler) cachedVerdict(ctx context.Context, obj *sharestatev1.SharePartitionState) (verdict leaderVerdict, confirmed bool, err error) {
	leader := obj.Status.Leader
	if leader == nil || leader.PodName == "" {
		return leaderVerdict{}, true, nil
	}
	if verdict, ok := r.gone.get(leader.PodUID); ok {
		return verdict, true, nil
	}
	cached, err := r.getPod(ctx, r.Client, types.NamespacedName{Namespace: obj.Namespace, Name: leader.PodName})
	if err != nil {
		return leaderVerdict{}, false, err
	}
	return judgeLeader(leader, cached, r.Clock.Now(), r.NotReadyGrace), false, nil
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

// needsReconcile reports whether a reconcile of the partition, as listed, would change anything: fence
// it (its leader stale by the cache: the reconcile confirms it), set a condition, repair its label, or
// look again at the end of its leader's not-Ready grace. It sends no request to the API server.
func (r *SharePartitionStateReconciler) needsReconcile(ctx context.Context, obj *sharestatev1.SharePartitionState) bool {
	if _, labelled := wantedLeaderLabel(obj); !labelled {
		return true
	}
	verdict, _, err := r.cachedVerdict(ctx, obj)
	if err != nil || verdict.stale || verdict.recheckAfter > 0 {
		return true
	}
	planned, _ := plannedStatus(obj, verdict)
	return !equality.Semantic.DeepEqual(obj.Status, planned.Status)
}

// DefaultResyncPeriod is how often the fencing reconciler looks at every partition when no pod event
// brings it there (--partition-resync-period).
const DefaultResyncPeriod = partitionbook.DefaultPeriod

// look is the resync's look at a partition it listed (and recorded in the book): it reports a change
// of the partition's leader and asks for its reconcile when that would change something
// (needsReconcile). A partition it cannot judge (its pod unreadable from the cache) is asked for too:
// its reconcile retries with the work queue's back-off.
func (r *SharePartitionStateReconciler) look(ctx context.Context, obj *sharestatev1.SharePartitionState) error {
	r.reportLeaderChange(client.ObjectKeyFromObject(obj), obj)
	if !r.needsReconcile(ctx, obj) {
		return nil
	}
	return r.request(ctx, obj)
}

// passed takes the end of a resync pass: its duration, and, when it listed every partition, the
// partition gauges' counts, and it forgets the leader epochs of the partitions that are gone.
func (r *SharePartitionStateReconciler) passed(pass partitionbook.Pass) {
	resyncDuration.Observe(pass.Took.Seconds())
	if pass.Err != nil {
		return
	}
	r.counts.set(pass.Counts)
	// A fence from before this pass began matters only to a pod request whose List began earlier still
	// and that is still asking for its partitions, a pass later: there is none.
	r.fencedAt.Range(func(key, at any) bool {
		if r.Clock.Since(at.(time.Time)) > pass.Took {
			r.fencedAt.Delete(key)
		}
		return true
	})
	r.leaderEpoch.Range(func(key, _ any) bool {
		if k := key.(types.NamespacedName); !pass.Seen[k] {
			r.leaderEpoch.Delete(k)
		}
		return true
	})
}
