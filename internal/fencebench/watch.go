package fencebench

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// waitTimeout bounds one wait: fencing 1000 partitions takes seconds, not minutes.
const waitTimeout = 2 * time.Minute

// waitFor watches the namespace's partitions until want has held for n of them, and returns when the
// last one was seen. A watch can end at any time (the API server's watch timeout, a restart, a
// proxy's idle limit) and that says nothing about the partitions: the wait opens it again from the
// last resourceVersion it saw, and lists again when that version is too old for the API server
// (410 Gone). Failed API requests are retried. Only ctx, or waitTimeout, ends the wait early.
func waitFor(ctx context.Context, c client.WithWatch, ns string, n int, want func(*v1.SharePartitionState) bool) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	w := &waiter{c: c, ns: ns, n: n, want: want, seen: map[string]bool{}}
	for {
		done, err := w.step(ctx)
		if done {
			return w.at, nil
		}
		if err != nil {
			w.lastErr = err
		}
		if ctx.Err() != nil {
			return time.Time{}, w.failure(ctx)
		}
		switch {
		case w.progressed:
			w.delay = 0
		case w.backOff(ctx) != nil:
			return time.Time{}, w.failure(ctx)
		}
	}
}

// waiter is the state of one waitFor.
type waiter struct {
	c    client.WithWatch
	ns   string
	n    int
	want func(*v1.SharePartitionState) bool

	seen       map[string]bool // the partitions want has held for
	at         time.Time       // when the last of them was seen
	rv         string          // where the next watch starts; "" lists first
	progressed bool            // the last step listed or received an event
	delay      time.Duration   // the next back-off, after a step that made no progress
	lastErr    error           // the last failure, for the message if the wait fails
	watches    int             // watches opened, lists made: for the message
	lists      int
}

// step lists (when there is no resourceVersion to go on from) or watches until the watch ends, and
// says whether n partitions are seen.
func (w *waiter) step(ctx context.Context) (bool, error) {
	w.progressed = false
	if w.rv == "" {
		if err := w.list(ctx); err != nil {
			return false, err
		}
		w.progressed = true
		if len(w.seen) >= w.n {
			return true, nil
		}
	}
	return w.watch(ctx)
}

func (w *waiter) list(ctx context.Context) error {
	var list v1.SharePartitionStateList
	w.lists++
	if err := w.c.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
		return fmt.Errorf("listing the partitions: %w", err)
	}
	for i := range list.Items {
		w.observe(&list.Items[i])
	}
	w.rv = list.ResourceVersion
	return nil
}

func (w *waiter) observe(sps *v1.SharePartitionState) {
	if w.want(sps) && !w.seen[sps.Name] {
		w.seen[sps.Name] = true
		w.at = time.Now()
	}
}

// watch watches from w.rv until n partitions are seen or the watch ends.
func (w *waiter) watch(ctx context.Context) (bool, error) {
	w.watches++
	wi, err := w.c.Watch(ctx, &v1.SharePartitionStateList{}, client.InNamespace(w.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: w.rv, AllowWatchBookmarks: true}})
	if err != nil {
		err = fmt.Errorf("watching the partitions from resourceVersion %q: %w", w.rv, err)
		if isTooOld(err) {
			w.rv = "" // list again
		}
		return false, err
	}
	defer wi.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case ev, open = <-wi.ResultChan():
		case <-ctx.Done():
			return false, nil
		}
		if !open {
			return false, nil // ended: the caller opens another from w.rv
		}
		switch ev.Type {
		case watch.Error:
			err := apierrors.FromObject(ev.Object)
			if isTooOld(err) {
				w.rv = ""
			}
			return false, fmt.Errorf("the watch of the partitions failed: %w", err)
		case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
			sps, ok := ev.Object.(*v1.SharePartitionState)
			if !ok {
				return false, fmt.Errorf("the watch of the partitions sent a %T", ev.Object)
			}
			w.progressed = true
			w.rv = sps.ResourceVersion
			if ev.Type == watch.Added || ev.Type == watch.Modified {
				w.observe(sps)
			}
			if len(w.seen) >= w.n {
				return true, nil
			}
		}
	}
}

// isTooOld says the API server no longer has the resourceVersion a watch was to start from.
func isTooOld(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// backOff waits before the next step when the last one made no progress: 50 ms, doubling up to 2 s.
func (w *waiter) backOff(ctx context.Context) error {
	w.delay = min(max(2*w.delay, 50*time.Millisecond), 2*time.Second)
	t := time.NewTimer(w.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failure is the error of a wait that ctx ended.
func (w *waiter) failure(ctx context.Context) error {
	err := fmt.Errorf("%d of %d seen after %d lists and %d watches: %w", len(w.seen), w.n, w.lists, w.watches, context.Cause(ctx))
	if w.lastErr != nil {
		err = errors.Join(err, fmt.Errorf("the last failure: %w", w.lastErr))
	}
	return err
}
