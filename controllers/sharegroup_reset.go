package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/prommetrics"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// errResetOvertaken says a partition's state epoch moved past the reset's (a fence at the same time):
// the reset starts again at a higher epoch.
var errResetOvertaken = errors.New("a partition's state epoch moved during the reset")

// errStateEpochExhausted says the reset would need a state epoch above the highest Initialize accepts.
var errStateEpochExhausted = errors.New("the state epoch cannot be raised any further")

// maxResetRounds bounds how often one pass starts a reset again after being overtaken.
const maxResetRounds = 3

// reconcileReset carries out the group's offset reset request once (semantics §9): it chooses a state
// epoch above every partition's and records it in status before touching any partition, then
// initializes every named partition at it with the new start offset, which fences every live leader.
// The recorded request id makes a request run once however often the group is reconciled.
//
// The reset owns status.lastOffsetReset and the OffsetReset condition. Its start is written here,
// conditionally on the group's resourceVersion, before any partition is touched, and moves the scope's
// stored group; its completion goes with the pass's status write, then conditional too.
func (r *ShareGroupReconciler) reconcileReset(ctx context.Context, s *groupScope) error {
	sg := s.group
	req := sg.Spec.OffsetReset
	if req == nil {
		forgetRefusal(sg)
		return nil
	}
	last := sg.Status.LastOffsetReset
	if last != nil && last.ID == req.ID && last.CompletionTime != nil {
		return nil
	}
	existing, err := r.livePartitions(ctx, sg)
	if err != nil {
		return err
	}
	targets, err := sg.ResetTargets(*req, existing)
	var refusal *sharestatev1.ResetRefusal
	if errors.As(err, &refusal) {
		r.refuseReset(sg, req.ID, refusal.Reason, refusal.Message)
		return nil // nothing to retry until the spec changes
	}
	if err != nil {
		return err
	}
	for round := 1; ; round++ {
		if last == nil || last.ID != req.ID || last.StartTime == nil {
			err := r.startReset(ctx, sg)
			if errors.Is(err, errStateEpochExhausted) {
				r.refuseReset(sg, req.ID, sharestatev1.ReasonStateEpochExhausted, err.Error())
				return nil // retrying cannot raise the epoch further
			}
			if err != nil {
				return err
			}
			s.stored = sg.DeepCopy()
		}
		err := r.initializeTargets(ctx, sg, targets)
		if err == nil {
			break
		}
		if !errors.Is(err, errResetOvertaken) || round == maxResetRounds {
			return err
		}
		last = nil // start again at a higher epoch
	}
	r.completeReset(s, int32(len(targets)))
	return nil
}

// completeReset records the reset's completion in the pass's group: the pass's status write, which
// then is conditional on the group's resourceVersion, stores it, and only once that write succeeded is
// it reported with an event (reportCompletedReset). Recorded before the write, the event would be
// recorded again by every pass that retries a failed write; and a pass working on a cached group from
// before the completion conflicts there instead of completing (and reporting) the reset a second time.
func (r *ShareGroupReconciler) completeReset(s *groupScope, partitions int32) {
	reset := s.group.Status.LastOffsetReset
	now := metav1.NewTime(r.Clock.Now())
	reset.CompletionTime, reset.Partitions = &now, partitions
	s.resetCompleted = fmt.Sprintf("reset %q initialized %d partitions at state epoch %d", reset.ID, partitions, reset.StateEpoch)
	meta.SetStatusCondition(&s.group.Status.Conditions, metav1.Condition{Type: sharestatev1.ConditionOffsetReset,
		Status: metav1.ConditionTrue, Reason: sharestatev1.ReasonResetCompleted, ObservedGeneration: s.group.Generation, Message: s.resetCompleted})
}

// reportCompletedReset emits the event of a reset whose completion the pass stored.
func (r *ShareGroupReconciler) reportCompletedReset(s *groupScope) {
	if s.resetCompleted != "" {
		r.Recorder.Eventf(s.group, nil, "Normal", sharestatev1.EventReasonOffsetReset, "Reset", "%s", s.resetCompleted)
	}
}

// startReset chooses the reset's state epoch from the partitions as the API server has them and
// records it, with the start time, in one status write conditional on the group's resourceVersion.
func (r *ShareGroupReconciler) startReset(ctx context.Context, sg *sharestatev1.ShareGroup) error {
	partitions, err := r.livePartitions(ctx, sg)
	if err != nil {
		return err
	}
	next := sg.NextResetStateEpoch(partitions)
	if next > sharestatev1.MaxResetStateEpoch {
		return fmt.Errorf("%w: a partition is at state epoch %d, and Initialize may use at most %d",
			errStateEpochExhausted, next-1, sharestatev1.MaxResetStateEpoch)
	}
	epoch := int32(next)
	now := metav1.NewTime(r.Clock.Now())
	sg.Status.LastOffsetReset = &sharestatev1.OffsetResetStatus{ID: sg.Spec.OffsetReset.ID, StateEpoch: epoch, StartTime: &now}
	meta.SetStatusCondition(&sg.Status.Conditions, metav1.Condition{
		Type: sharestatev1.ConditionOffsetReset, Status: metav1.ConditionFalse, Reason: sharestatev1.ReasonResetInProgress, ObservedGeneration: sg.Generation,
		Message: fmt.Sprintf("reset %q is initializing the partitions at state epoch %d", sg.Spec.OffsetReset.ID, epoch),
	})
	if err := r.Client.Status().Update(ctx, sg); err != nil {
		return fmt.Errorf("recording the start of reset %q: %w", sg.Spec.OffsetReset.ID, err)
	}
	return nil
}

// initializeTargets initializes at the reset's epoch every target this reset has not reset yet, then
// checks on the API server that each was reset by this reset and not overtaken by a higher epoch. A
// target already reset is left alone: an Initialize at an equal state epoch writes a fresh state, as
// Kafka's does (semantics §5), and would wipe what a leader wrote since (a pass retried after its
// completion was not recorded).
func (r *ShareGroupReconciler) initializeTargets(ctx context.Context, sg *sharestatev1.ShareGroup, targets []sharestatev1.ResetTarget) error {
	reset := sg.Status.LastOffsetReset
	partitions, err := r.livePartitions(ctx, sg)
	if err != nil {
		return err
	}
	if pending := pendingTargets(string(sg.Spec.GroupID), targets, partitions, reset); len(pending) > 0 {
		if err := r.initializePending(ctx, sg, pending, reset.StateEpoch); err != nil {
			return err
		}
		if partitions, err = r.livePartitions(ctx, sg); err != nil {
			return err
		}
	}
	byName := partitionsByName(partitions)
	for _, t := range targets {
		obj := byName[sharestatev1.SharePartitionStateName(string(sg.Spec.GroupID), string(t.TopicID), t.Partition)]
		if obj == nil || obj.Status.CreateTime == nil {
			return fmt.Errorf("partition %d of topic %s is not initialized after the reset", t.Partition, t.TopicID)
		}
		if !resetBy(obj, reset) {
			return fmt.Errorf("partition %d of topic %s is at state epoch %d since %s: %w", t.Partition, t.TopicID,
				obj.Status.StateEpoch, obj.Status.CreateTime, errResetOvertaken)
		}
	}
	return nil
}

// initializePending initializes the targets at the reset's epoch with their new start offsets.
func (r *ShareGroupReconciler) initializePending(ctx context.Context, sg *sharestatev1.ShareGroup, targets []sharestatev1.ResetTarget, epoch int32) error {
	persister, err := r.persisters.forNamespace(sg.Namespace)
	if err != nil {
		return err
	}
	req, err := initializeRequest(string(sg.Spec.GroupID), targets, epoch)
	if err != nil {
		return err
	}
	resp := persister.Initialize(ctx, req)
	for _, topic := range resp.Topics {
		for _, p := range topic.Partitions {
			switch p.ErrorCode {
			case sharestate.ErrNone:
			case sharestate.ErrFencedStateEpoch:
				return fmt.Errorf("partition %d of topic %s: %w", p.Partition, topic.TopicID, errResetOvertaken)
			default:
				return fmt.Errorf("initializing partition %d of topic %s: %s: %s", p.Partition, topic.TopicID, p.ErrorCode, p.ErrorMessage)
			}
		}
	}
	return nil
}

// pendingTargets are the targets of the group's reset whose partition it has not reset yet, as the API
// server has the partitions.
func pendingTargets(group string, targets []sharestatev1.ResetTarget, partitions []sharestatev1.SharePartitionState,
	reset *sharestatev1.OffsetResetStatus) []sharestatev1.ResetTarget {
	byName := partitionsByName(partitions)
	var pending []sharestatev1.ResetTarget
	for _, t := range targets {
		obj := byName[sharestatev1.SharePartitionStateName(group, string(t.TopicID), t.Partition)]
		if obj == nil || !resetBy(obj, reset) {
			pending = append(pending, t)
		}
	}
	return pending
}

// resetBy reports whether the partition holds a state that the reset initialized: one at its state
// epoch created at or after its start. The reset's epoch is above every epoch the partitions had when it
// started, so no older state has it.
func resetBy(obj *sharestatev1.SharePartitionState, reset *sharestatev1.OffsetResetStatus) bool {
	return obj.Status.CreateTime != nil && obj.Status.StateEpoch == reset.StateEpoch && !obj.Status.CreateTime.Before(reset.StartTime)
}

func partitionsByName(partitions []sharestatev1.SharePartitionState) map[string]*sharestatev1.SharePartitionState {
	byName := make(map[string]*sharestatev1.SharePartitionState, len(partitions))
	for i := range partitions {
		byName[partitions[i].Name] = &partitions[i]
	}
	return byName
}

func initializeRequest(group string, targets []sharestatev1.ResetTarget, epoch int32) (sharestate.InitializeRequest, error) {
	req := sharestate.InitializeRequest{GroupID: group}
	index := map[sharestatev1.TopicID]int{}
	for _, t := range targets {
		i, ok := index[t.TopicID]
		if !ok {
			id, err := sharestate.ParseTopicID(string(t.TopicID))
			if err != nil {
				return req, err
			}
			i = len(req.Topics)
			index[t.TopicID] = i
			req.Topics = append(req.Topics, sharestate.TopicData[sharestate.InitializePartition]{TopicID: id})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions,
			sharestate.InitializePartition{Partition: t.Partition, StateEpoch: epoch, StartOffset: t.StartOffset})
	}
	return req, nil
}

// refuseReset reports a request that will not run as written, with the condition reason, and emits
// a Warning once per change. The request stays in spec.offsetReset: the spec is the user's, and
// removing it would also remove the evidence of what was asked. The refusal is final for that
// spec: it shows in the OffsetReset condition and, while the request stays, in Ready (the MESSAGE
// column of kubectl get sg -o wide), until the request is changed or removed.
func (r *ShareGroupReconciler) refuseReset(sg *sharestatev1.ShareGroup, id, reason, why string) {
	c := metav1.Condition{Type: sharestatev1.ConditionOffsetReset, Status: metav1.ConditionFalse, Reason: reason,
		Message: sharestatev1.ResetRefusalMessage(id, why), ObservedGeneration: sg.Generation}
	if old := meta.FindStatusCondition(sg.Status.Conditions, sharestatev1.ConditionOffsetReset); old == nil || old.Message != c.Message {
		r.Recorder.Eventf(sg, nil, "Warning", sharestatev1.EventReasonOffsetResetRefused, "Reset", "%s", c.Message)
	}
	meta.SetStatusCondition(&sg.Status.Conditions, c)
}

// forgetRefusal drops the refusal of a request that was removed from the spec: nothing is refused
// any more. (The condition of a reset that ran stays, with status.lastOffsetReset.)
func forgetRefusal(sg *sharestatev1.ShareGroup) {
	if c := meta.FindStatusCondition(sg.Status.Conditions, sharestatev1.ConditionOffsetReset); c != nil && sharestatev1.IsResetRefusedReason(c.Reason) && c.Status == metav1.ConditionFalse {
		meta.RemoveStatusCondition(&sg.Status.Conditions, sharestatev1.ConditionOffsetReset)
	}
}

// resetRefusal returns the OffsetReset condition when it refuses the group's current request.
func resetRefusal(sg *sharestatev1.ShareGroup, conditions []metav1.Condition) *metav1.Condition {
	c := meta.FindStatusCondition(conditions, sharestatev1.ConditionOffsetReset)
	if sg.Spec.OffsetReset == nil || c == nil || c.Status != metav1.ConditionFalse || !sharestatev1.IsResetRefusedReason(c.Reason) {
		return nil
	}
	return c
}

// livePartitions lists the group's share-partitions from the API server (a reset's epoch is never
// chosen from the cache).
func (r *ShareGroupReconciler) livePartitions(ctx context.Context, sg *sharestatev1.ShareGroup) ([]sharestatev1.SharePartitionState, error) {
	var list sharestatev1.SharePartitionStateList
	if err := r.APIReader.List(ctx, &list, client.InNamespace(sg.Namespace), client.MatchingLabels{sharestatev1.LabelShareGroup: sg.Name}); err != nil {
		return nil, fmt.Errorf("listing the partitions of %s: %w", sg.Name, err)
	}
	return list.Items, nil
}

// persisterSet keeps one persister per namespace for the resets (a persister serves one namespace).
type persisterSet struct {
	client client.Client // reads from the API server, not a cache

	mu sync.Mutex
	m  map[string]*persister.Persister
}

func (s *persisterSet) forNamespace(ns string) (*persister.Persister, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.m[ns]; ok {
		return p, nil
	}
	observer, err := prommetrics.NewPersisterObserver(ctrlmetrics.Registry)
	if err != nil {
		return nil, err
	}
	p, err := persister.New(persister.Options{Client: s.client, Namespace: ns, Identity: persister.Identity{PodName: "sharestate-operator"},
		Observer: observer})
	if err != nil {
		return nil, err
	}
	if s.m == nil {
		s.m = map[string]*persister.Persister{}
	}
	s.m[ns] = p
	return p, nil
}
