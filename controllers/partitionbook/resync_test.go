package partitionbook

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// pagedReader lists its partitions a page at a time, as the API server does with limit and continue,
// and can fail the List of one page. It is only a list to walk: nothing here is about concurrency or
// the API server's rules.
type pagedReader struct {
	items  []sharestatev1.SharePartitionState
	failAt int // the page whose List fails, counted from 1; 0: none
	lists  int
}

func (r *pagedReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("not used")
}

func (r *pagedReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.lists++
	if r.lists == r.failAt {
		return errors.New("the API server is away")
	}
	var o client.ListOptions
	o.ApplyOptions(opts)
	from := 0
	if o.Continue != "" {
		from, _ = strconv.Atoi(o.Continue)
	}
	to := min(len(r.items), from+int(o.Limit))
	out := list.(*sharestatev1.SharePartitionStateList)
	out.Items = nil
	for i := from; i < to; i++ {
		out.Items = append(out.Items, *r.items[i].DeepCopy())
	}
	out.Continue = ""
	if to < len(r.items) {
		out.Continue = strconv.Itoa(to)
	}
	return nil
}

func partitions(n int) []sharestatev1.SharePartitionState {
	out := make([]sharestatev1.SharePartitionState, n)
	for i := range out {
		out[i].Namespace, out[i].Name = "ns", fmt.Sprintf("p-%03d", i)
		out[i].Spec.GroupID = sharestatev1.GroupID(fmt.Sprintf("g-%d", i%3))
		out[i].Status.StateBatches = []sharestatev1.StateBatch{"0-4/0/1"}
	}
	return out
}

// A pass records every partition in the book and hands each to Look, without its state batches; a
// partition gone since the last pass leaves the book; the counts are of what the pass saw.
func TestResyncPassRecordsAndLooksAtEveryPartition(t *testing.T) {
	reader := &pagedReader{items: partitions(250)}
	var looked []string
	s := &Resync{Reader: reader, Book: New(), Period: time.Minute, Look: func(_ context.Context, p *sharestatev1.SharePartitionState) error {
		if len(p.Status.StateBatches) != 0 {
			t.Errorf("%s handed to Look with its state batches", p.Name)
		}
		looked = append(looked, p.Name)
		return nil
	}}
	pass := s.passWithDefaults(t)
	if pass.Err != nil || len(pass.Seen) != 250 || len(looked) != 250 || pass.Counts.Total != 250 {
		t.Fatalf("the pass saw %d, looked at %d, counted %d (%v); want 250 each", len(pass.Seen), len(looked), pass.Counts.Total, pass.Err)
	}
	if reader.lists != 3 {
		t.Errorf("250 partitions took %d Lists, want 3 pages of %d", reader.lists, PageSize)
	}
	if got, complete := s.Book.Group("ns", "g-0"); !complete || len(got) != 84 || got[0].InFlight != 5 {
		t.Fatalf("group g-0 holds %d partitions (complete %v), want 84, each 5 in flight", len(got), complete)
	}

	reader.items = reader.items[:200] // 50 partitions deleted
	pass = s.passWithDefaults(t)
	if pass.Counts.Total != 200 || pass.Seen[types.NamespacedName{Namespace: "ns", Name: "p-210"}] {
		t.Fatalf("after 50 deletions the pass counted %d", pass.Counts.Total)
	}
	if got, _ := s.Book.Group("ns", "g-0"); len(got) != 67 {
		t.Errorf("group g-0 holds %d partitions after the deletions, want 67", len(got))
	}
}

// A pass whose List fails says so, counts nothing, and leaves a new book incomplete: Group does not
// answer for partitions that may only not have been looked at.
func TestResyncPassThatFailsToListLeavesTheBookIncomplete(t *testing.T) {
	reader := &pagedReader{items: partitions(250), failAt: 2}
	s := &Resync{Reader: reader, Book: New(), Look: func(context.Context, *sharestatev1.SharePartitionState) error { return nil }}
	pass := s.passWithDefaults(t)
	if pass.Err == nil || len(pass.Seen) != PageSize {
		t.Fatalf("a pass whose second List failed: err %v, saw %d; want an error after %d", pass.Err, len(pass.Seen), PageSize)
	}
	if _, complete := s.Book.Group("ns", "g-0"); complete {
		t.Fatal("the book answers after a pass that failed")
	}
}

// Later passes spread their pages over the period: a page every period/pages, none for one page.
func TestResyncPacesItsPagesOverThePeriod(t *testing.T) {
	s := &Resync{Period: 2 * time.Minute}
	for _, tt := range []struct {
		partitions int
		gap        time.Duration
	}{{0, 0}, {PageSize, 0}, {PageSize + 1, time.Minute}, {10000, 1200 * time.Millisecond}} {
		if got := s.pageGap(tt.partitions); got != tt.gap {
			t.Errorf("%d partitions: a page every %s, want %s", tt.partitions, got, tt.gap)
		}
	}
}

// passWithDefaults runs one unpaced pass as Start's first does, with Start's defaults.
func (s *Resync) passWithDefaults(t *testing.T) Pass {
	t.Helper()
	s.setDefaults()
	return s.pass(context.Background(), 0)
}
