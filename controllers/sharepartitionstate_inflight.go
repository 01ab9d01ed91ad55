package controllers

import (
	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// dropStateBatches drops the partition's state batches and managedFields, which no reconciler reads,
// once the one figure the operator needs from the batches is in status.inFlightRecords: the persister
// keeps it there with every state; for a state written before it did, it is counted here. Every list
// of partitions the operator makes goes through it (listPages): a partition then holds a few hundred
// bytes instead of up to 10,000 batches, and a fence's copy and comparison of its status cost little.
//
// The object is no longer what the API server holds: nothing may write it back whole (an Update). The
// reconcilers write partitions with merge patches of what they change, so a field dropped or filled in
// here is the same on both sides of such a patch, and the patch leaves it as it is.
func dropStateBatches(p *sharestatev1.SharePartitionState) {
	p.ManagedFields = nil
	if p.Status.InFlightRecords == nil && len(p.Status.StateBatches) > 0 {
		count := countInFlight(&p.Status)
		p.Status.InFlightRecords = &count
	}
	p.Status.StateBatches = nil
}

// inFlight is a partition's count of not-yet-complete offsets: the one the persister keeps, else
// counted from the batches (a state written before the persister kept it).
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
