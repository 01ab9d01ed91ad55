package controllers

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// DefaultResyncPeriod is how often the fencing reconciler looks at every partition when no pod event
// brings it there (--partition-resync-period).
const DefaultResyncPeriod = 2 * time.Minute

// partitionResync looks at every partition once a period: it lists them from the API server, a page
// at a time, and reconciles each as a pod's request does (reconcilePartition). It finds what no pod
// event brings:
//   - a partition whose recorded leader's pod went while the operator was down, or before the
//     partition's first state was written, or was replaced under its name unseen;
//   - a partition without the leader-pod label (written by a persister from before the label, or
//     whose persister stopped between its status write and its label patch) or with a label that
//     disagrees with its status (changed or removed by hand): the label is set from status, once;
//   - the conditions (Initialized, Fenced turned False) and the LeaderChanged events of the leader
//     changes since the last look, which the operator no longer learns from a watch of partitions.
//
// It writes only what changed, so its cost grows with the number of partitions (one List of them a
// period), never with the rate of writes. It runs on the elected operator only.
type partitionResync struct {
	r *SharePartitionStateReconciler
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the elected operator fences.
func (s *partitionResync) NeedLeaderElection() bool { return true }

// Start runs a pass at once, then one every period, until ctx ends.
func (s *partitionResync) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("partition-resync")
	ctx = ctrl.LoggerInto(ctx, log)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		started := s.r.Now()
		n, err := s.pass(ctx)
		resyncDuration.Observe(time.Since(started).Seconds())
		if err != nil && ctx.Err() == nil {
			log.Error(err, "Partition resync failed", "partitions", n)
		}
		timer.Reset(s.r.ResyncPeriod)
	}
}

// pass reconciles every partition of the namespaces and returns how many it looked at.
func (s *partitionResync) pass(ctx context.Context) (int, error) {
	namespaces := s.r.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	seen := map[types.NamespacedName]bool{}
	var counts partitionCounts
	for _, ns := range namespaces {
		err := listPages(ctx, s.r.APIReader, ns, func(page []sharestatev1.SharePartitionState) error {
			for i := range page {
				seen[client.ObjectKeyFromObject(&page[i])] = true
			}
			// A partition's error is the next pass's to retry; the others go on.
			_, err := s.r.reconcilePartitions(ctx, page)
			if err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "Could not reconcile some partitions")
			}
			for i := range page { // as reconciled: a fence or condition written shows at once
				counts.add(&page[i])
			}
			return nil
		})
		if err != nil {
			return len(seen), fmt.Errorf("listing the partitions: %w", err)
		}
	}
	s.r.counts.set(counts)
	// Forget the leader epochs of partitions that are gone (a pass that failed to list returned above).
	s.r.leaderEpoch.Range(func(key, _ any) bool {
		if k := key.(types.NamespacedName); !seen[k] {
			s.r.leaderEpoch.Delete(k)
		}
		return true
	})
	return len(seen), nil
}
