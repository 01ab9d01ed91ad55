package partitionbook

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// DefaultPeriod is the resync's default period (--partition-resync-period).
const DefaultPeriod = 2 * time.Minute

// Resync looks at every partition once a period and keeps the book: it lists them from the API
// server, a page at a time, records each in Book and hands it to Look. It is a manager Runnable that
// runs on the elected operator only.
type Resync struct {
	// Reader lists the partitions: the API server, never a cache (the operator caches no partition).
	Reader client.Reader
	// Namespaces are the namespaces listed; empty: all.
	Namespaces []string
	// Period is how often every partition is looked at (default DefaultPeriod).
	Period time.Duration
	// Clock tells the time (default the real clock).
	Clock clock.PassiveClock
	// Book is kept.
	Book *Book
	// Look is handed every partition listed, as listed (without its state batches), once it is recorded
	// in the book; it may keep it. An error stops the pass (Look returns one only when ctx ended).
	Look func(ctx context.Context, p *sharestatev1.SharePartitionState) error
	// Passed, if set, is told of the end of every pass.
	Passed func(Pass)
}

// Pass is the outcome of one pass over every partition.
type Pass struct {
	// Seen are the partitions the pass listed.
	Seen map[types.NamespacedName]bool
	// Counts are the book's at the pass's end; valid when Err is nil.
	Counts Counts
	// Took is how long the pass took.
	Took time.Duration
	// Err is why the pass ended before it listed every partition.
	Err error
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: only the elected operator looks.
func (s *Resync) NeedLeaderElection() bool { return true }

// Start runs a pass at once, then one every period, until ctx ends. The first pass runs at full speed,
// so that the book is complete soon after the operator starts; the later ones spread their pages over
// the period (pacing), so that the List costs the API server and the operator the same at every
// moment rather than a burst each period.
func (s *Resync) Start(ctx context.Context) error {
	s.setDefaults()
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
		pass := s.pass(ctx, pageGap)
		if pass.Err != nil && ctx.Err() == nil {
			log.Error(pass.Err, "Partition resync failed", "partitions", len(pass.Seen))
		}
		if s.Passed != nil {
			s.Passed(pass)
		}
		pageGap = s.pageGap(len(pass.Seen))
		next := max(0, s.Period-pass.Took)
		if pageGap > 0 {
			next = 0 // a paced pass fills its period: the next one follows at once, the first's too
		}
		timer.Reset(next)
	}
}

func (s *Resync) setDefaults() {
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	if s.Period <= 0 {
		s.Period = DefaultPeriod
	}
}

// PageSize is how many partitions a page of the resync holds: small, so that the pages of a pass are
// many and its cost is spread evenly (at 10,000 partitions, a page every 1.2 s of a 2-minute period),
// at the price of a List request for each.
const PageSize = 100

// pageGap is the pause between two pages of a pass over n partitions: their pages spread over the
// whole period, so that one pass follows the other and the resync's cost is the same at every moment
// (a pass then takes the period and the time of its Lists, and the next starts at once).
func (s *Resync) pageGap(n int) time.Duration {
	pages := (n + PageSize - 1) / PageSize
	if pages <= 1 {
		return 0
	}
	return s.Period / time.Duration(pages)
}

// pass looks at every partition of the namespaces, pausing gap after each page.
func (s *Resync) pass(ctx context.Context, gap time.Duration) Pass {
	started := s.Clock.Now()
	namespaces := s.Namespaces
	if len(namespaces) == 0 {
		namespaces = []string{""}
	}
	pass := Pass{Seen: map[types.NamespacedName]bool{}}
	for _, ns := range namespaces {
		err := ListPages(ctx, s.Reader, ns, func(page []sharestatev1.SharePartitionState) error {
			for i := range page {
				pass.Seen[client.ObjectKeyFromObject(&page[i])] = true
				s.Book.Record(&page[i])
				if err := s.Look(ctx, &page[i]); err != nil {
					return err
				}
			}
			if gap > 0 && !sleepFor(ctx, gap) {
				return ctx.Err()
			}
			return nil
		}, client.Limit(PageSize))
		if err != nil {
			pass.Err = fmt.Errorf("listing the partitions: %w", err)
			pass.Took = s.Clock.Since(started)
			return pass
		}
	}
	// Each group takes what the pass recorded at its own moment of its refresh period, not all at the
	// pass's end: their status writes stay spread over the period.
	pass.Counts = s.Book.Passed(pass.Seen)
	pass.Took = s.Clock.Since(started)
	return pass
}

// ListPageSize bounds the partitions one List of ListPages returns by default: a broker may lead
// thousands, each with up to 10,000 batches.
const ListPageSize = 500

// ListPages lists the partitions of namespace ("" for all) from reader a page at a time, and hands
// each page to visit, without the partitions' state batches (DropStateBatches). opts come after its
// own (namespace, ListPageSize), and win.
func ListPages(ctx context.Context, reader client.Reader, namespace string, visit func([]sharestatev1.SharePartitionState) error, opts ...client.ListOption) error {
	opts = append([]client.ListOption{client.InNamespace(namespace), client.Limit(ListPageSize)}, opts...)
	for token := ""; ; {
		var page sharestatev1.SharePartitionStateList
		if err := reader.List(ctx, &page, append(opts, client.Continue(token))...); err != nil {
			return err
		}
		for i := range page.Items {
			DropStateBatches(&page.Items[i])
		}
		if err := visit(page.Items); err != nil {
			return err
		}
		if token = page.Continue; token == "" {
			return nil
		}
	}
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
