package controllers

import (
	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

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
