package fencebench

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// waitTimeout bounds one wait: fencing 1000 partitions takes seconds, not minutes.
const waitTimeout = 2 * time.Minute

// waitFor follows the namespace's partitions until want has held for n of them, and returns when the
// last one was seen. The watch behind it is re-established whenever it ends (testenv.Follow): a
// watch that ends says nothing about the partitions. Only ctx, or waitTimeout, ends the wait early.
func waitFor(ctx context.Context, c client.WithWatch, ns string, n int, want func(*sharestatev1.SharePartitionState) bool) (time.Time, error) {
	if n <= 0 {
		return time.Now(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	seen := map[string]bool{}
	var at time.Time
	err := testenv.Follow(ctx, c, &sharestatev1.SharePartitionStateList{}, ns, func(ev watch.EventType, obj client.Object) bool {
		sps, ok := obj.(*sharestatev1.SharePartitionState)
		if ok && ev != watch.Deleted && !seen[sps.Name] && want(sps) {
			seen[sps.Name] = true
			at = time.Now()
		}
		return len(seen) >= n
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("%d of %d seen %w", len(seen), n, err)
	}
	return at, nil
}
