package controllers

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// listRecorder is a cache reader that answers List with n partitions and records whether each List
// asked for the cache's own objects (client.UnsafeDisableDeepCopy).
type listRecorder struct {
	client.Reader
	n      int
	copied []bool
}

func (r *listRecorder) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	r.copied = append(r.copied, o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy)
	if l, ok := list.(*sharestatev1.SharePartitionStateList); ok {
		l.Items = make([]sharestatev1.SharePartitionState, r.n)
	}
	return nil
}

// TestCollectorReadsCacheWithoutCopies: a scrape counts every partition; it must not deep-copy each
// of them from the cache to do so (at 10,000 partitions that was 11 MB of garbage per scrape).
func TestCollectorReadsCacheWithoutCopies(t *testing.T) {
	r := &listRecorder{n: 3}
	c := &PartitionsCollector{reader: r}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	if n, err := testutil.GatherAndCount(reg, "sharestate_partitions"); err != nil || n != 4 {
		t.Fatalf("gathered %d partition series (%v), want 4", n, err)
	}
	if len(r.copied) != 2 || r.copied[0] || r.copied[1] {
		t.Fatalf("lists that deep-copied the cache's objects: %v, want none of two", r.copied)
	}
}
