package controllers

import (
	"strconv"

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
// aggregate needs from them (the in-flight record count), and drops managedFields as every cached
// kind does.
//
// Objects in the cache are therefore not what the API server holds: nothing may write one back
// whole (an Update). The reconcilers write partitions with merge patches of what they change,
// conditional on the resourceVersion where a fencing decision rides on it.
func SlimPartitionState(obj any) (any, error) {
	sps, ok := obj.(*sharestatev1.SharePartitionState)
	if !ok {
		return obj, nil
	}
	sps.ManagedFields = nil
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
