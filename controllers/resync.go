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
// at a time, records each in the partition book and asks the SharePartitionState reconciler for a
// reconcile of each one whose look would change something (needsReconcile). It finds what no pod
// event brings:
//   - a partition whose recorded leader's pod went while the operator was down, or before the
//     partition's first state was written, or was replaced under its name unseen;
//   - a partition without the leader-pod label (written by a persister from before the label, or
//     whose persister stopped between its status write and its label patch) or with a label that
//     disagrees with its status (changed or removed by hand): the label is set from status, once;
//   - the conditions (Initialized, Fenced turned False) and the LeaderChanged events of the leader
//     changes since the last look, which the operator no longer learns from a watch of partitions.
//
// The ShareGroup reconciler computes the groups' statuses from the book.
//
// Its cost grows with the number of partitions (one List of them a period, and a reconcile, which
// reads the partition again, only of those that need one), never with the rate of writes. It runs on
// the elected operator only.
type partitionResync struct {
	r *SharePartitionStateReconciler
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the elected operator fences.
func (s *partitionResync) NeedLeaderElection() bool { return true }

// Start runs a pass at once, then one every period, until ctx ends. The first pass runs at full speed,
// so that the partition book is complete soon after the operator starts; the later ones spread their
// pages over the period (pacing), so that the List costs the API server and the operator the same at
// every moment rather than a burst each period.
func (s *partitionResync) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("partition-resync")
	ctx = ctrl.LoggerInto(ctx, log)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var pageGap time.Duration
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		started := s.r.Clock.Now()
		n, err := s.pass(ctx, pageGap)
		took := s.r.Clock.Since(started)
		resyncDuration.Observe(took.Seconds())
		if err != nil && ctx.Err() == nil {
			log.Error(err, "Partition resync failed", "partitions", n)
		}
		pageGap = s.pageGap(n)
		next := max(0, s.r.ResyncPeriod-took)
		if pageGap > 0 {
			next = 0 // a paced pass fills its period: the next one follows at once, the first's too
		}
		timer.Reset(next)
	}
}

// pageGap is the pause between two pages of a pass over n partitions: their pages spread over the
// whole period, so that one pass follows the other and the resync's cost is the same at every moment
// (a pass then takes the period and the time of its Lists, and the next starts at once).
func (s *partitionResync) pageGap(n int) time.Duration {
	pages := (n + resyncPageSize - 1) / resyncPageSize
	if pages <= 1 {
		return 0
	}
	return s.r.ResyncPeriod / time.Duration(pages)
}

// resyncPageSize is how many partitions a page of the resync holds: small, so that the pages of a
// pass are many and its cost is spread evenly (at 10,000 partitions, a page every 1.2 s of a 2-minute
// period), at the price of a List request for each.
const resyncPageSize = 100

// pass looks at every partition of the namespaces, pausing gap after each page, records them in the
// partition book, and returns how many it looked at.
func (s *partitionResync) pass(ctx context.Context, gap time.Duration) (int, error) {
	namespaces := s.r.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	seen := map[types.NamespacedName]bool{}
	for _, ns := range namespaces {
		err := listPages(ctx, s.r.APIReader, ns, func(page []sharestatev1.SharePartitionState) error {
			for i := range page {
				seen[client.ObjectKeyFromObject(&page[i])] = true
				if err := s.look(ctx, &page[i]); err != nil {
					return err
				}
			}
			if gap > 0 && !sleepFor(ctx, gap) {
				return ctx.Err()
			}
			return nil
		}, client.Limit(resyncPageSize))
		if err != nil {
			return len(seen), fmt.Errorf("listing the partitions: %w", err)
		}
	}
	// The counts are the book's, as looked at and reconciled: a fence or condition written in the pass
	// shows.
	// Each group takes what the pass recorded at its own moment of its refresh period, not all at the
	// pass's end: their status writes stay spread over the period.
	s.r.counts.set(s.r.Book.passed(seen))
	// Forget the leader epochs of partitions that are gone (a pass that failed to list returned above).
	s.r.leaderEpoch.Range(func(key, _ any) bool {
		if k := key.(types.NamespacedName); !seen[k] {
			s.r.leaderEpoch.Delete(k)
		}
		return true
	})
	return len(seen), nil
}

// look records the partition in the book, reports a change of its leader and asks for its reconcile
// when that would change something. A partition it cannot judge (its pod unreadable from the cache)
// is asked for too: its reconcile retries with the work queue's back-off.
func (s *partitionResync) look(ctx context.Context, obj *sharestatev1.SharePartitionState) error {
	s.r.Book.record(obj)
	s.r.reportLeaderChange(client.ObjectKeyFromObject(obj), obj)
	if !s.r.needsReconcile(ctx, obj) {
		return nil
	}
	return s.r.request(ctx, obj)
}

// sleepFor waits d, and reports false if ctx ended first.
func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
