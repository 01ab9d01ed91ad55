package controllers

import (
	"strconv"
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
// leader, which no reconciler reads. The strings that repeat from partition to partition (namespace,
// group, topic, leader, owner, condition types and reasons) are shared (partitionStrings).
//
// Objects in the cache are therefore not what the API server holds: nothing may write one back
// whole (an Update). The reconcilers write partitions with merge patches of what they change,
// conditional on the resourceVersion where a fencing decision rides on it; a field the cache dropped
// is absent from both sides of such a patch, so the patch leaves it as it is.
func SlimPartitionState(obj any) (any, error) {
	sps, ok := obj.(*sharestatev1.SharePartitionState)
	if !ok {
		return obj, nil
	}
	sps.ManagedFields = nil
	sps.Status.WriteTime, sps.Status.WriteCount, sps.Status.LastWriteID = nil, 0, ""
	sps.Status.FencedLeader = nil
	partitionStrings.share(sps)
	// The API server's copy has no such annotation, unless someone set it by hand: it is not the count.
	delete(sps.Annotations, cachedInFlightAnnotation)
	if len(sps.Status.StateBatches) == 0 {
		return sps, nil
	}
	if sps.Annotations == nil {
		sps.Annotations = map[string]string{}
	}
	if batches, err := persister.StoredBatches(&sps.Status); err == nil {
		sps.Annotations[cachedInFlightAnnotation] = strconv.FormatInt(sharestate.InFlightRecords(batches), 10)
	} else {
		// Corrupt batches count no in-flight records, as a live read's would (inFlight).
		sps.Annotations[cachedInFlightAnnotation] = "0"
	}
	sps.Status.StateBatches = nil
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

// maxSharedStrings bounds the table of shared strings. Its values change slowly (a pod's UID with each
// restart of the pod); when it is full it starts afresh, and the objects cached before keep their copies.
const maxSharedStrings = 1 << 14

// partitionStrings holds one copy of each string that partitions repeat: at 10,000 partitions the
// same namespace, group, topic, leader pod and condition reasons would otherwise be decoded and kept
// 10,000 times.
var partitionStrings = &stringTable{strings: map[string]string{}}

type stringTable struct {
	mu      sync.Mutex
	strings map[string]string
}

// intern returns the table's copy of s, adding s when it has none.
func (t *stringTable) intern(s string) string {
	if s == "" {
		return s
	}
	if shared, ok := t.strings[s]; ok {
		return shared
	}
	if len(t.strings) >= maxSharedStrings {
		clear(t.strings)
	}
	t.strings[s] = s
	return s
}

// share replaces the repeated strings of a partition with the table's copies.
func (t *stringTable) share(sps *sharestatev1.SharePartitionState) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sps.Kind, sps.APIVersion, sps.Namespace = t.intern(sps.Kind), t.intern(sps.APIVersion), t.intern(sps.Namespace)
	for k, v := range sps.Labels {
		sps.Labels[k] = t.intern(v)
	}
	for i := range sps.OwnerReferences {
		o := &sps.OwnerReferences[i]
		o.APIVersion, o.Kind, o.Name, o.UID = t.intern(o.APIVersion), t.intern(o.Kind), t.intern(o.Name), types.UID(t.intern(string(o.UID)))
	}
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
