package controllers

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
)

// groupIDIndex indexes the cached ShareGroups by their Kafka group id.
const groupIDIndex = "spec.groupId"

// DefaultTotalsRefresh is how often a group's status is recomputed from the partition book when
// nothing else changes: the persister's writes change the totals constantly, and the operator watches
// no partition; the book follows them at each resync (docs/architecture.md, "What the operator
// watches").
const DefaultTotalsRefresh = 30 * time.Second

// ShareGroupReconciler adopts a group's SharePartitionStates, aggregates their state into the group's
// status, carries out admin offset resets, and deletes the group's state when the group is deleted.
type ShareGroupReconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server, for decisions a stale cache must not take.
	APIReader client.Reader
	// LiveClient reads and writes through the API server only; the resets' persisters use it.
	LiveClient client.Client
	// Recorder emits Events.
	Recorder events.EventRecorder
	// TotalsRefresh is how often the totals are refreshed (default DefaultTotalsRefresh).
	TotalsRefresh time.Duration
	// Clock tells the time (default the real clock; tests set a fake one, k8s.io/utils/clock/testing).
	Clock clock.PassiveClock
	// Book holds the partitions as the operator last saw them (filled by the fencing reconciler's
	// resync); a group's status is computed from it.
	Book *partitionbook.Book

	persisters persisterSet
	// changed carries the partitions whose status the fencing reconciler wrote, to pass their groups.
	changed chan event.GenericEvent
}

// changedBacklog bounds the partition changes waiting to be passed to their groups; beyond it a
// change is dropped, and its group's status waits for its next refresh.
const changedBacklog = 4096

// SetupWithManager registers the reconciler, its indexes and its watches with the manager.
func (r *ShareGroupReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.TotalsRefresh <= 0 {
		r.TotalsRefresh = DefaultTotalsRefresh
	}
	if r.Book == nil {
		return errors.New("the ShareGroup reconciler needs the partition book the fencing reconciler fills")
	}
	r.persisters.client = r.LiveClient
	r.changed = make(chan event.GenericEvent, changedBacklog)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &sharestatev1.ShareGroup{}, groupIDIndex, func(o client.Object) []string {
		return []string{string(o.(*sharestatev1.ShareGroup).Spec.GroupID)}
	}); err != nil {
		return fmt.Errorf("indexing ShareGroups by group id: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("sharegroup").
		// The group's own status writes must not reconcile it again: only spec changes and deletion.
		For(&sharestatev1.ShareGroup{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted()))).
		// No watch of partitions: each pass lists the group's from the API server, and passes come on
		// the group's period, on its own changes, and when the fencing reconciler wrote a partition's
		// status (PartitionChanged), gathered for partitionChangeDelay.
		WatchesRawSource(source.Channel(r.changed, r.partitionEvents())).
		Complete(r)
}

// PartitionChanged passes the group of a partition whose status the fencing reconciler wrote (a
// fence, a condition), after partitionChangeDelay, so that the group's status shows it before its
// next refresh. It never blocks: a change beyond changedBacklog waits for that refresh.
func (r *ShareGroupReconciler) PartitionChanged(namespace string, group sharestatev1.GroupID) {
	if r.changed == nil {
		return
	}
	changed := &sharestatev1.SharePartitionState{}
	changed.Namespace, changed.Spec.GroupID = namespace, group
	select {
	case r.changed <- event.GenericEvent{Object: changed}:
	default:
	}
}

// deletionStarted passes the update that marks a group for deletion.
func deletionStarted() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// partitionChangeDelay is how long a group's pass waits after the fencing reconciler wrote the status
// of one of its partitions: the changes of that second share one pass and one status write. A
// broker's death fences its partitions one by one, and each fence changes its group's fenced count;
// passed at once, a group of 50 would write its status up to 50 times during the fence, each write
// competing for the API server with the fences themselves.
const partitionChangeDelay = time.Second

// partitionEvents enqueues, after partitionChangeDelay, the groups of the partitions passed to
// PartitionChanged (a request waiting already keeps its time).
func (r *ShareGroupReconciler) partitionEvents() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	return handler.Funcs{
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) {
			for _, req := range r.groupsOf(ctx, e.Object) {
				q.AddAfter(req, partitionChangeDelay)
			}
		},
	}
}

func (r *ShareGroupReconciler) groupsOf(ctx context.Context, o client.Object) []ctrl.Request {
	sps, ok := o.(*sharestatev1.SharePartitionState)
	if !ok {
		return nil
	}
	var groups sharestatev1.ShareGroupList
	if err := r.Client.List(ctx, &groups, client.InNamespace(sps.Namespace), client.MatchingFields{groupIDIndex: string(sps.Spec.GroupID)},
		client.UnsafeDisableDeepCopy); err != nil { // only their names are read
		ctrl.LoggerFrom(ctx).Error(err, "Failed to list the groups of a partition", "sharePartitionState", klog.KObj(sps))
		return nil
	}
	requests := make([]ctrl.Request, len(groups.Items))
	for i := range groups.Items {
		requests[i] = ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&groups.Items[i])}
	}
	return requests
}

// +kubebuilder:rbac:groups=sharestate.dev,resources=sharegroups,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharegroups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharegroups/finalizers,verbs=update
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates,verbs=get;list;create;update;patch;delete;deletecollection

// groupScope is what one pass over a group works on, threaded through its phases.
type groupScope struct {
	// group is the group as this pass changes it.
	group *sharestatev1.ShareGroup
	// stored is the group as last written: the reset phase writes its start itself, conditionally,
	// and the status written at the end is a patch against it.
	stored *sharestatev1.ShareGroup
	// partitions are the group's own partitions, adopted if need be; listed says they were listed
	// (a pass whose phases stopped before keeps the aggregate it had).
	partitions []partitionbook.Summary
	listed     bool
	// resetCompleted, when not empty, says the reset completed in this pass (the event's message): the
	// status write that stores it must be conditional, and the event follows it.
	resetCompleted string
}

// conflictRetryAfter is how soon a pass whose conditional patch conflicted runs again: about the time
// the cache takes to receive the newer object.
const conflictRetryAfter = 100 * time.Millisecond

// groupPhase is one step of a pass. An error stops the phases after it.
type groupPhase func(ctx context.Context, s *groupScope) error

// Reconcile adopts, resets and aggregates the group, or deletes its state when the group is deleted.
func (r *ShareGroupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sg := &sharestatev1.ShareGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, sg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("group", sg.Spec.GroupID))
	if !sg.DeletionTimestamp.IsZero() {
		recheck, err := r.finalize(ctx, sg)
		return ctrl.Result{RequeueAfter: recheck}, err
	}
	s := &groupScope{group: sg, stored: sg.DeepCopy()}
	phaseErr := r.doReconcile(ctx, s, []groupPhase{r.ensureFinalizer, r.adoptPartitions, r.reconcileReset})
	if err := r.writeStatus(ctx, s); err != nil {
		return ctrl.Result{}, errors.Join(phaseErr, err)
	}
	if apierrors.IsConflict(phaseErr) {
		// A patch conditional on the cache's copy met a newer object: the next pass, once the cache
		// has it, works on that. Not an error to log: it is how the lock keeps lists from being lost.
		return ctrl.Result{RequeueAfter: conflictRetryAfter}, nil
	}
	if phaseErr != nil {
		return ctrl.Result{}, phaseErr
	}
	return ctrl.Result{RequeueAfter: r.nextPass(sg)}, nil
}

// A group being created passes every newGroupPoll for its first youngGroup, listing its partitions
// each time (beingCreated): nothing else tells the operator, which watches no partition, that the
// persister has created or initialized one, and the quickstart's and a new consumer group's state
// should show within seconds. Past that age it passes on its period, as every group does.
const (
	newGroupPoll = time.Second
	youngGroup   = 5 * time.Minute
)

// nextPass is how long until the group's next pass: newGroupPoll while it is young and being created,
// else its next refresh of its totals. sg holds the status this pass computed.
func (r *ShareGroupReconciler) nextPass(sg *sharestatev1.ShareGroup) time.Duration {
	if beingCreated(sg) && r.Clock.Now().Sub(sg.CreationTimestamp.Time) < youngGroup {
		return newGroupPoll
	}
	return r.nextTotalsRefresh(sg.UID)
}

// nextTotalsRefresh is how long until the group's next refresh of its totals: the group's own slot
// of the period, fixed by its UID, at least half a period away.
//
// The slots spread the groups' status writes evenly over the period, and keep them spread. The groups
// an operator starts with are all passed at once: a refresh one period after each pass would write
// every group's status in one burst each period (at 10,000 partitions, 200 writes within a second,
// beside the persisters'), and one within ±10 % of a period after it, as it was, in a burst of 6 s.
// At least half a period: a pass that a partition's change brought just before the slot is not
// followed by another at once.
func (r *ShareGroupReconciler) nextTotalsRefresh(uid types.UID) time.Duration {
	period := r.TotalsRefresh
	slot := time.Duration(fnvHash(string(uid)) % uint64(period))
	sinceSlot := (time.Duration(r.Clock.Now().UnixNano()) - slot) % period
	if sinceSlot < 0 { // a clock before 1970
		sinceSlot += period
	}
	next := period - sinceSlot
	if next < period/2 {
		next += period
	}
	return next
}

// fnvHash is the 64-bit FNV-1a hash of s.
func fnvHash(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s)) // a hash.Hash never fails to write
	return h.Sum64()
}

// doReconcile runs the phases in order and stops at the first error.
func (r *ShareGroupReconciler) doReconcile(ctx context.Context, s *groupScope, phases []groupPhase) error {
	for _, phase := range phases {
		if err := phase(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// ensureFinalizer adds the finalizer with which the group's state is deleted with it, before
// anything else happens to the group.
func (r *ShareGroupReconciler) ensureFinalizer(ctx context.Context, s *groupScope) error {
	if controllerutil.ContainsFinalizer(s.group, sharestatev1.FinalizerPartitionState) {
		return nil
	}
	// A merge patch replaces the whole finalizer list: the optimistic lock keeps it from dropping a
	// finalizer someone else added since the cache's copy (a conflict requeues the group).
	patch := client.MergeFromWithOptions(s.group.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(s.group, sharestatev1.FinalizerPartitionState)
	if err := r.Client.Patch(ctx, s.group, patch); err != nil {
		return fmt.Errorf("adding the finalizer: %w", err)
	}
	s.stored = s.group.DeepCopy()
	return nil
}

// writeStatus writes what the pass's phases set: the group's aggregate, recomputed from the partitions
// observed (if the phases got as far as listing them), the adoption's and the reset's conditions,
// once and only when something changed. The aggregate is recomputed on every pass and only this
// reconciler writes it, so a merge patch of what changed is enough; an update conditional on a
// resourceVersion the cache has not caught up with would only conflict and retry. A pass that
// completed a reset writes conditionally, and reports the completion once it is stored. (The reset's
// start, which acts on an epoch decision, is a conditional update of its own.)
func (r *ShareGroupReconciler) writeStatus(ctx context.Context, s *groupScope) error {
	if s.listed {
		s.group.Status = aggregate(s.group, s.partitions, s.group.Status)
	}
	if equality.Semantic.DeepEqual(s.stored.Status, s.group.Status) {
		return nil
	}
	patch := client.MergeFrom(s.stored)
	if s.resetCompleted != "" {
		patch = client.MergeFromWithOptions(s.stored, client.MergeFromWithOptimisticLock{})
	}
	if err := r.Client.Status().Patch(ctx, s.group, patch); err != nil {
		return fmt.Errorf("updating the status: %w", err)
	}
	r.reportCompletedReset(s)
	return nil
}

// adoptPartitions finds the group's partitions in the partition book (as the operator last saw them,
// at most a resync period ago), or lists them from the API server while the book is not complete, holds
// none of the group's, or the group is being created (beingCreated), first making the group the controller of those
// that have none (created before the group, or by hand) and labelling them with the group's name, and
// filling in the topic's name where the group declares it and the object has none. An object whose
// name is not the one derived from its key is not adopted: the persister finds a partition's state by
// that name alone, so such an object is a second state for the partition that nothing reads; the
// MisnamedPartitionStates condition names it, for an admin to delete.
func (r *ShareGroupReconciler) adoptPartitions(ctx context.Context, s *groupScope) error {
	sg := s.group
	list, complete := r.Book.Group(sg.Namespace, sg.Spec.GroupID)
	if !complete || len(list) == 0 || beingCreated(sg) {
		var err error
		if list, err = r.listPartitions(ctx, sg); err != nil {
			return err
		}
	}
	owned := list[:0]
	var misnamed []string
	for _, p := range list {
		if p.Controller != "" && p.Controller != sg.UID {
			continue // another ShareGroup with the same group id holds it
		}
		if p.Misnamed {
			misnamed = append(misnamed, p.Name)
			continue
		}
		adopted, err := r.adopt(ctx, sg, p)
		if err != nil {
			return err
		}
		if adopted != nil {
			owned = append(owned, *adopted)
		}
	}
	s.partitions, s.listed = owned, true
	r.reportMisnamed(sg, misnamed)
	return nil
}

// beingCreated reports a group whose status says its partitions are not all there yet: none, or not
// all initialized. Its passes list its partitions from the API server, so that a new group shows its
// state within a pass rather than a resync period; a group whose partitions are fenced keeps reading
// the book, which the fences update as they are written.
func beingCreated(sg *sharestatev1.ShareGroup) bool {
	c := meta.FindStatusCondition(sg.Status.Conditions, sharestatev1.ConditionReady)
	return c == nil || c.Reason == sharestatev1.ReasonNoPartitions || c.Reason == sharestatev1.ReasonPartitionsNotInitialized
}

// listPartitions lists the partitions of the group's id from the API server, a page at a time, by the
// CRD's selectable field (so that an object without the group's label or owner is found too), and
// records them in the book.
func (r *ShareGroupReconciler) listPartitions(ctx context.Context, sg *sharestatev1.ShareGroup) ([]partitionbook.Summary, error) {
	var all []partitionbook.Summary
	err := partitionbook.ListPages(ctx, r.APIReader, sg.Namespace, func(page []sharestatev1.SharePartitionState) error {
		for i := range page {
			r.Book.Record(&page[i])
			all = append(all, partitionbook.SummaryOf(&page[i]))
		}
		return nil
	}, client.MatchingFields{"spec.groupId": string(sg.Spec.GroupID)})
	if err != nil {
		return nil, fmt.Errorf("listing the partitions: %w", err)
	}
	return all, nil
}

// adopt makes the group the partition's controller, labels it with the group's name and names its
// topic, in one patch, where any of that is missing. p is the partition as the book holds it, which may
// be a period old: the patch is made on the partition read from the API server, conditional on its
// resourceVersion, since a merge patch replaces the whole owner reference list (a conflict, a
// persister's write meanwhile, requeues the group). It returns the partition as it now is: p itself
// when nothing was missing; nil when another ShareGroup holds it.
func (r *ShareGroupReconciler) adopt(ctx context.Context, sg *sharestatev1.ShareGroup, p partitionbook.Summary) (*partitionbook.Summary, error) {
	if !needsAdoption(sg, p) {
		return &p, nil
	}
	live := &sharestatev1.SharePartitionState{}
	key := client.ObjectKey{Namespace: sg.Namespace, Name: p.Name}
	if err := r.APIReader.Get(ctx, key, live); err != nil {
		return nil, fmt.Errorf("reading %s to adopt it: %w", key, err)
	}
	if owner := metav1.GetControllerOf(live); owner != nil && owner.UID != sg.UID {
		return nil, nil // another ShareGroup with the same group id took it meanwhile
	}
	if !needsAdoption(sg, partitionbook.SummaryOf(live)) {
		adopted := partitionbook.SummaryOf(live)
		return &adopted, nil
	}
	patch := client.MergeFromWithOptions(live.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if err := controllerutil.SetControllerReference(sg, live, r.Client.Scheme()); err != nil {
		return nil, err
	}
	if live.Labels == nil {
		live.Labels = map[string]string{}
	}
	live.Labels[sharestatev1.LabelShareGroup] = sg.Name
	if topicName := sg.DeclaredTopicName(live.Spec.TopicID); live.Spec.TopicName == "" && topicName != "" {
		live.Spec.TopicName = topicName // the schema lets an unset topicName be set once
	}
	if err := r.Client.Patch(ctx, live, patch); err != nil {
		return nil, fmt.Errorf("adopting %s: %w", key, err)
	}
	adopted := partitionbook.SummaryOf(live)
	return &adopted, nil
}

// needsAdoption reports whether the group must still make itself the partition's controller, label it
// with its name, or name its topic.
func needsAdoption(sg *sharestatev1.ShareGroup, p partitionbook.Summary) bool {
	nameTopic := !p.TopicNamed && sg.DeclaredTopicName(p.TopicID) != ""
	return p.Controller == "" || p.GroupLabel != sg.Name || nameTopic
}

// maxNamesInMessage bounds the misnamed objects a condition message lists.
const maxNamesInMessage = 5

// reportMisnamed sets the MisnamedPartitionStates condition, and emits a Warning when the set of
// misnamed objects changes.
func (r *ShareGroupReconciler) reportMisnamed(sg *sharestatev1.ShareGroup, names []string) {
	c := metav1.Condition{Type: sharestatev1.ConditionMisnamedPartitionStates, Status: metav1.ConditionFalse,
		Reason: sharestatev1.ReasonNamesDerivedFromKeys, Message: "every SharePartitionState of the group has the name derived from its key",
		ObservedGeneration: sg.Generation}
	if len(names) > 0 {
		slices.Sort(names)
		listed := names[:min(len(names), maxNamesInMessage)]
		more := ""
		if len(names) > len(listed) {
			more = fmt.Sprintf(" and %d more", len(names)-len(listed))
		}
		c.Status, c.Reason = metav1.ConditionTrue, sharestatev1.ReasonNameNotDerivedFromKey
		c.Message = fmt.Sprintf("%d SharePartitionStates of the group are not under the name derived from their key, so the "+
			"persister never reads them and the group does not adopt them; delete them: %s%s", len(names), strings.Join(listed, ", "), more)
	}
	if old := meta.FindStatusCondition(sg.Status.Conditions, c.Type); c.Status == metav1.ConditionTrue && (old == nil || old.Message != c.Message) {
		r.Recorder.Eventf(sg, nil, "Warning", sharestatev1.EventReasonMisnamedPartitionState, "Adopt", "%s", c.Message)
	}
	meta.SetStatusCondition(&sg.Status.Conditions, c)
}

// finalizeRecheck is how soon a group whose partition states are still being deleted is looked at
// again: a partition's deletion waits only for its own finalizers, if someone set any.
const finalizeRecheck = time.Second

// finalize deletes the group's partition state, and lets the group go once none is left. While some
// is left it returns when to look again.
func (r *ShareGroupReconciler) finalize(ctx context.Context, sg *sharestatev1.ShareGroup) (time.Duration, error) {
	if !controllerutil.ContainsFinalizer(sg, sharestatev1.FinalizerPartitionState) {
		return 0, nil
	}
	left, err := r.deletePartitionState(ctx, sg)
	if err != nil {
		return 0, err
	}
	if left > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Waiting for the group's partition states to be deleted", "left", left)
		return finalizeRecheck, nil
	}
	// A merge patch replaces the whole finalizer list: the optimistic lock keeps it from dropping a
	// finalizer someone else added meanwhile. A group already gone has nothing left to finalize.
	patch := client.MergeFromWithOptions(sg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(sg, sharestatev1.FinalizerPartitionState)
	if err := client.IgnoreNotFound(r.Client.Patch(ctx, sg, patch)); err != nil {
		return 0, fmt.Errorf("removing the finalizer: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Deleted the group's partition state")
	return 0, nil
}

// deletePartitionState deletes the group's SharePartitionStates and returns how many the API server
// still has. When the SharePartitionState kind itself is gone (its CRD deleted, as `make uninstall`
// does first), every one of them went with it: none is left, and the finalizer must not hold the
// group, nor with it the deletion of the ShareGroup CRD, forever.
func (r *ShareGroupReconciler) deletePartitionState(ctx context.Context, sg *sharestatev1.ShareGroup) (int, error) {
	selector := []client.DeleteAllOfOption{client.InNamespace(sg.Namespace), client.MatchingLabels{sharestatev1.LabelShareGroup: sg.Name}}
	err := r.Client.DeleteAllOf(ctx, &sharestatev1.SharePartitionState{}, selector...)
	if kindGone(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("deleting the group's partition state: %w", err)
	}
	var left sharestatev1.SharePartitionStateList
	err = r.APIReader.List(ctx, &left, client.InNamespace(sg.Namespace), client.MatchingLabels{sharestatev1.LabelShareGroup: sg.Name})
	if kindGone(err) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing the group's partition state: %w", err)
	}
	return len(left.Items), nil
}

// kindGone reports whether a request on a collection of SharePartitionStates failed because the
// kind does not exist: the REST mapper no longer knows it, or it still does and the API server
// answers 404 for the whole resource (a collection in a namespace is never NotFound otherwise).
func kindGone(err error) bool {
	return err != nil && (meta.IsNoMatchError(err) || apierrors.IsNotFound(err))
}
