package controllers

import (
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// SlimPartitionState is the operator's cache transform for SharePartitionStates. The operator reads
// a partition's spec, epochs, leader, creation time, delivery-complete count, in-flight record count
// and conditions, never its state batches: those are most of the object (up to 10,000 strings), and
// the persister rewrites them on every acknowledgement. The one figure the group aggregate needs from
// them, the in-flight record count, the persister keeps in status.inFlightRecords; for a state written
// before it did, the transform counts the batches once and keeps the count in that field of the
// cached copy. It drops managedFields as every cached kind does, and the persister's record of its
// last write (time, count, id) and the last fenced leader, which no reconciler reads. What partitions
// repeat is held once (partitionShares). The operator's watch of partitions drops the batches and
// managedFields before they are even decoded (internal/operator/watchtrim.go): what this
// transform still drops there comes from lists, and from states without the count.
//
// Objects in the cache are therefore not what the API server holds: nothing may write one back
// whole (an Update). The reconcilers write partitions with merge patches of what they change,
// conditional on the resourceVersion where a fencing decision rides on it; a field the cache dropped
// or filled in is the same on both sides of such a patch, so the patch leaves it as it is. Nor may
// anything change a cached object in place (its labels and owner references may be another
// partition's too): readers that skip the cache's copy only read.
func SlimPartitionState(obj any) (any, error) {
	sps, ok := obj.(*sharestatev1.SharePartitionState)
	if !ok {
		return obj, nil
	}
	sps.ManagedFields = nil
	sps.Status.WriteTime, sps.Status.WriteCount, sps.Status.LastWriteID = nil, 0, ""
	sps.Status.FencedLeader = nil
	if sps.Status.InFlightRecords == nil && len(sps.Status.StateBatches) > 0 {
		count := countInFlight(&sps.Status)
		sps.Status.InFlightRecords = &count
	}
	sps.Status.StateBatches = nil
	partitionShares.share(sps)
	return sps, nil
}

// inFlight is a partition's count of not-yet-complete offsets: the one the persister keeps (or the
// cache filled in), else counted from the batches (a state written before the persister kept it).
func inFlight(p *sharestatev1.SharePartitionState) int64 {
	if n := p.Status.InFlightRecords; n != nil {
		return *n
	}
	return countInFlight(&p.Status)
}

// countInFlight counts the batches' not-yet-complete offsets. A state whose batches do not decode
// counts none (the persister reports it, and the partition's own status shows it).
func countInFlight(status *sharestatev1.SharePartitionStateStatus) int64 {
	batches, err := persister.StoredBatches(status)
	if err != nil {
		return 0
	}
	return sharestate.InFlightRecords(batches)
}

// maxShared bounds each of the shared tables. Their entries change slowly (a pod's UID with each
// restart of the pod, an owner's with each re-creation of its group); a full table starts afresh, and
// the objects cached before keep what they hold.
const maxShared = 1 << 14

// partitionShares holds one copy of what partitions repeat. At 10,000 partitions the same namespace,
// group, topic, leader pod and condition reasons, the same one-label map and the same owner reference
// would otherwise be decoded and kept 10,000 times.
var partitionShares = newShares()

type shares struct {
	mu      sync.Mutex
	strings map[string]string
	labels  map[string]map[string]string       // by the group label's value: maps of that one label
	owners  map[string][]metav1.OwnerReference // by the whole reference: slices of that one reference
}

func newShares() *shares {
	return &shares{strings: map[string]string{}, labels: map[string]map[string]string{}, owners: map[string][]metav1.OwnerReference{}}
}

// sharedOf returns table's value for key, built and added when the table has none.
func sharedOf[V any](table map[string]V, key string, build func() V) V {
	if v, ok := table[key]; ok {
		return v
	}
	if len(table) >= maxShared {
		clear(table)
	}
	v := build()
	table[key] = v
	return v
}

// intern returns the shared copy of s.
func (t *shares) intern(s string) string {
	if s == "" {
		return s
	}
	return sharedOf(t.strings, s, func() string { return s })
}

// share replaces what a partition repeats with the shared copies: strings, and the labels and owner
// references of the usual shape (the group label alone, one owner). Maps and slices of any other
// shape stay the partition's own.
func (t *shares) share(sps *sharestatev1.SharePartitionState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sps.Kind, sps.APIVersion, sps.Namespace = t.intern(sps.Kind), t.intern(sps.APIVersion), t.intern(sps.Namespace)
	t.shareLabels(sps)
	t.shareOwners(sps)
	spec := &sps.Spec
	spec.GroupID, spec.TopicID, spec.TopicName = sharestatev1.GroupID(t.intern(string(spec.GroupID))), sharestatev1.TopicID(t.intern(string(spec.TopicID))), t.intern(spec.TopicName)
	if l := sps.Status.Leader; l != nil {
		l.PodName, l.PodUID = t.intern(l.PodName), t.intern(l.PodUID)
	}
	for i := range sps.Status.Conditions {
		c := &sps.Status.Conditions[i]
		c.Type, c.Status, c.Reason = t.intern(c.Type), metav1.ConditionStatus(t.intern(string(c.Status))), t.intern(c.Reason)
	}
}

func (t *shares) shareLabels(sps *sharestatev1.SharePartitionState) {
	group, ok := sps.Labels[sharestatev1.LabelShareGroup]
	if !ok || len(sps.Labels) != 1 {
		return
	}
	sps.Labels = sharedOf(t.labels, group, func() map[string]string {
		return map[string]string{sharestatev1.LabelShareGroup: t.intern(group)}
	})
}

func (t *shares) shareOwners(sps *sharestatev1.SharePartitionState) {
	if len(sps.OwnerReferences) != 1 {
		return
	}
	o := sps.OwnerReferences[0]
	// The whole reference is the key: a partition whose reference differs in any field keeps its own.
	key := strings.Join([]string{o.APIVersion, o.Kind, o.Name, string(o.UID), boolText(o.Controller), boolText(o.BlockOwnerDeletion)}, "\x00")
	sps.OwnerReferences = sharedOf(t.owners, key, func() []metav1.OwnerReference {
		shared := o
		shared.APIVersion, shared.Kind, shared.Name, shared.UID = t.intern(o.APIVersion), t.intern(o.Kind), t.intern(o.Name), types.UID(t.intern(string(o.UID)))
		return []metav1.OwnerReference{shared}
	})
}

func boolText(b *bool) string {
	if b == nil {
		return "-"
	}
	return strconv.FormatBool(*b)
}
