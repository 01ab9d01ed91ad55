package testenv

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Follow hands handle every object of list's kind in namespace ns: first each one a list returns (as
// watch.Added), then every change a watch reports (Added, Modified, Deleted), until handle returns
// true (Follow returns nil) or ctx ends (Follow returns an error that wraps its cause).
//
// A watch can end at any time, and that says nothing about the objects: the API server ends watches
// after its watch timeout, when it restarts or sheds load, and so may a proxy. Follow then opens
// another from the last resourceVersion it saw, and lists again (handing every object again) when the
// API server no longer has that version (410 Gone). Failed requests are retried with back-off. So
// handle may see an object's state more than once, never out of order within one watch.
func Follow(ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, handle func(watch.EventType, client.Object) bool) error {
	return FollowFrom(ctx, c, list, ns, "", handle)
}

// FollowFrom is Follow from resourceVersion rv: it hands only the changes after rv, and lists first
// only if the API server no longer has rv (or rv is ""). A caller that listed the objects itself,
// before what it times, follows from its list's resourceVersion so that no list of its own loads the
// API server during the timing.
func FollowFrom(ctx context.Context, c client.WithWatch, list client.ObjectList, ns, rv string, handle func(watch.EventType, client.Object) bool) error {
	f := &follower{c: c, list: list, ns: ns, handle: handle, rv: rv}
	for {
		done, err := f.step(ctx)
		if done {
			return nil
		}
		if err != nil {
			f.lastErr = err
		}
		if ctx.Err() != nil {
			return f.failure(ctx)
		}
		switch {
		case f.progressed:
			f.delay = 0
		case f.backOff(ctx) != nil:
			return f.failure(ctx)
		}
	}
}

// follower is the state of one Follow.
type follower struct {
	c      client.WithWatch
	list   client.ObjectList // the kind to follow; a copy is filled by each list
	ns     string
	handle func(watch.EventType, client.Object) bool

	rv         string        // where the next watch starts; "" lists first
	progressed bool          // the last step listed or received an event
	delay      time.Duration // the next back-off, after a step that made no progress
	lastErr    error         // the last failure, for the error if ctx ends
	lists      int           // lists made and watches opened, for the error
	watches    int
}

// step lists (when there is no resourceVersion to go on from) and watches until the watch ends; it
// says whether handle is satisfied.
func (f *follower) step(ctx context.Context) (bool, error) {
	f.progressed = false
	if f.rv == "" {
		done, err := f.listAll(ctx)
		if done || err != nil {
			return done, err
		}
		f.progressed = true
	}
	return f.watch(ctx)
}

func (f *follower) listAll(ctx context.Context) (bool, error) {
	f.lists++
	list := f.list.DeepCopyObject().(client.ObjectList)
	if err := f.c.List(ctx, list, client.InNamespace(f.ns)); err != nil {
		return false, fmt.Errorf("listing: %w", err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return false, err
	}
	f.rv = list.GetResourceVersion()
	for _, item := range items {
		obj, ok := item.(client.Object)
		if !ok {
			return false, fmt.Errorf("a list item is a %T", item)
		}
		if f.handle(watch.Added, obj) {
			return true, nil
		}
	}
	return false, nil
}

// watch watches from f.rv until handle is satisfied or the watch ends.
func (f *follower) watch(ctx context.Context) (bool, error) {
	f.watches++
	w, err := f.c.Watch(ctx, f.list.DeepCopyObject().(client.ObjectList), client.InNamespace(f.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: f.rv, AllowWatchBookmarks: true}})
	if err != nil {
		err = fmt.Errorf("watching from resourceVersion %q: %w", f.rv, err)
		if isTooOld(err) {
			f.rv = "" // list again
		}
		return false, err
	}
	defer w.Stop()
	for {
		var ev watch.Event
		var open bool
		select {
		case ev, open = <-w.ResultChan():
		case <-ctx.Done():
			return false, nil
		}
		if !open {
			return false, nil // ended: the caller opens another from f.rv
		}
		if ev.Type == watch.Error {
			err := apierrors.FromObject(ev.Object)
			if isTooOld(err) {
				f.rv = ""
			}
			return false, fmt.Errorf("the watch failed: %w", err)
		}
		obj, ok := ev.Object.(client.Object)
		if !ok {
			return false, fmt.Errorf("the watch sent a %s event of a %T", ev.Type, ev.Object)
		}
		f.progressed = true
		f.rv = obj.GetResourceVersion()
		if ev.Type != watch.Bookmark && f.handle(ev.Type, obj) {
			return true, nil
		}
	}
}

// isTooOld says the API server no longer has the resourceVersion a watch was to start from.
func isTooOld(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}

// backOff waits before the next step when the last one made no progress: 50 ms, doubling up to 2 s.
func (f *follower) backOff(ctx context.Context) error {
	f.delay = min(max(2*f.delay, 50*time.Millisecond), 2*time.Second)
	t := time.NewTimer(f.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// failure is the error of a Follow that ctx ended.
func (f *follower) failure(ctx context.Context) error {
	err := fmt.Errorf("after %d lists and %d watches: %w", f.lists, f.watches, context.Cause(ctx))
	if f.lastErr != nil {
		err = errors.Join(err, fmt.Errorf("the last failure: %w", f.lastErr))
	}
	return err
}
