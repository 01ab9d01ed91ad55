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

// cachedInFlightAnnotation carries, on a SharePartitionState held in the operator's cache only, the
// in-flight record count of the state batches the cache dropped (SlimPartitionState). It never
// reaches the API server: the operator writes partitions only with merge patches of the fields it
// changes, and a patch never carries an annotation both sides of it hold.
const cachedInFlightAnnotation = "sharestate.dev/cached-in-flight-records"

// SlimPartitionState is the operator's cache transform for SharePartitionStates. The operator reads
// a partition's spec, epochs, leader, creation time, delivery-complete count and conditions, never its
// state batches: those are most of the object (up to 10,000 strings), and the persister rewrites
// them on every acknowledgement. The cache keeps, instead of the batches, the one figure the group
// aggregate needs from them (the in-flight record count). It drops managedFields as every cached
// kind does, and the persister's record of its last write (time, count, id) and the last fenced
// leader, which no reconciler reads. What partitions repeat is held once (partitionShares).
//
// Objects in the cache are therefore not what the API server holds: nothing may write one back
// whole (an Update). The reconcilers write partitions with merge patches of what they change,
// conditional on the resourceVersion where a fencing decision rides on it; a field the cache dropped
// is absent from both sides of such a patch, so the patch leaves it as it is. Nor may anything change
// a cached object in place (its labels, annotations and owner references may be another partition's
// too): readers that skip the cache's copy only read.
func SlimPartitionState(obj any) (any, error) {
	sps, ok := obj.(*sharestatev1.SharePartitionState)
	if !ok {
		return obj, nil
	}
	sps.ManagedFields = nil
	sps.Status.WriteTime, sps.Status.WriteCount, sps.Status.LastWriteID = nil, 0, ""
	sps.Status.FencedLeader = nil
	// The API server's copy has no such annotation, unless someone set it by hand: it is not the count.
	delete(sps.Annotations, cachedInFlightAnnotation)
	if len(sps.Status.StateBatches) > 0 {
		count := "0" // corrupt batches count no in-flight records, as a live read's would (inFlight)
		if batches, err := persister.StoredBatches(&sps.Status); err == nil {
			count = strconv.FormatInt(sharestate.InFlightRecords(batches), 10)
		}
		if sps.Annotations == nil {
			sps.Annotations = map[string]string{}
		}
		sps.Annotations[cachedInFlightAnnotation] = count
		sps.Status.StateBatches = nil
	}
	partitionShares.share(sps)
	return sps, nil
}

// inFlight counts a partition's not-yet-complete offsets: from the figure the cache kept when it
// dropped the batches, or else from the batches (an object read from the API server). A state whose
// batches do not decode counts none (the persister reports it, and the partition's own status shows it).
func inFlight(p *sharestatev1.SharePartitionState) int64 {
	if v, ok := p.Annotations[cachedInFlightAnnotation]; ok && len(p.Status.StateBatches) == 0 {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n
		}
		return 0
	}
	batches, err := persister.StoredBatches(&p.Status)
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
// group, topic, leader pod and condition reasons, the same one-label map, the same owner reference
// and the same few in-flight counts would otherwise be decoded and kept 10,000 times.
var partitionShares = newShares()

type shares struct {
	mu          sync.Mutex
	strings     map[string]string
	labels      map[string]map[string]string       // by the group label's value: maps of that one label
	annotations map[string]map[string]string       // by in-flight count: maps of that one annotation
	owners      map[string][]metav1.OwnerReference // by the whole reference: slices of that one reference
}

func newShares() *shares {
	return &shares{strings: map[string]string{}, labels: map[string]map[string]string{},
		annotations: map[string]map[string]string{}, owners: map[string][]metav1.OwnerReference{}}
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

// share replaces what a partition repeats with the shared copies: strings, and the labels,
// annotations and owner references of the usual shape (the group label alone, the in-flight count
// alone, one owner). Maps and slices of any other shape stay the partition's own.
func (t *shares) share(sps *sharestatev1.SharePartitionState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sps.Kind, sps.APIVersion, sps.Namespace = t.intern(sps.Kind), t.intern(sps.APIVersion), t.intern(sps.Namespace)
	t.shareLabels(sps)
	t.shareAnnotations(sps)
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

func (t *shares) shareAnnotations(sps *sharestatev1.SharePartitionState) {
	count, ok := sps.Annotations[cachedInFlightAnnotation]
	if !ok || len(sps.Annotations) != 1 {
		return
	}
	sps.Annotations = sharedOf(t.annotations, count, func() map[string]string {
		return map[string]string{cachedInFlightAnnotation: count}
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
