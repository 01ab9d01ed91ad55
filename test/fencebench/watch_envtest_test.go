package fencebench_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/fencebench"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The benchmark's wait outlives its watches: whether a watch ends quietly, ends with 410 Gone in its
// stream, or cannot be opened again (410, or an error the API server's load causes), the wait goes on
// from where it was and sees every partition.
func TestWaitForSurvivesEndedWatches(t *testing.T) {
	testenv.Require(t, env)
	for _, tc := range []struct {
		name      string
		after     int
		goneEvent bool
		openErr   map[int32]error
	}{
		{name: "every watch ends after three events", after: 3},
		{name: "every watch ends with 410 Gone after three events", after: 3, goneEvent: true},
		{name: "the second watch cannot start: 410 Gone", after: 3, openErr: map[int32]error{
			2: apierrors.NewResourceExpired("too old resource version"),
		}},
		{name: "watches cannot start while the API server is overloaded", after: 5, openErr: map[int32]error{
			2: apierrors.NewTooManyRequests("overloaded", 0),
			3: apierrors.NewInternalError(errors.New("etcd timed out")),
			4: apierrors.NewServiceUnavailable("restarting"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const partitions = 20
			c := newClient(t)
			ns := env.Namespace(t)
			names := createPartitions(t, c, ns, partitions)
			fw := &flakyWatch{WithWatch: c, after: tc.after, goneEvent: tc.goneEvent, openErr: tc.openErr, firstOpened: make(chan struct{})}

			// Raise every partition's state epoch once the wait watches, so that the watches, not the
			// first list, must see the fences.
			var updates sync.WaitGroup
			updates.Go(func() {
				<-fw.firstOpened
				for _, name := range names {
					if err := raiseStateEpoch(c, ns, name); err != nil {
						t.Errorf("raising the state epoch of %s: %v", name, err)
						return
					}
				}
			})
			defer updates.Wait()

			fenced := func(s *sharestatev1.SharePartitionState) bool { return s.Status.StateEpoch >= 2 }
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := fencebench.WaitFor(ctx, fw, ns, partitions, fenced); err != nil {
				t.Fatalf("the wait failed: %v", err)
			}
			// The first watch ended before the wait was over, so the wait opened (or tried to open)
			// another. Not more: a list after a failed opening may see every fence at once.
			if n := fw.opened.Load(); n < 2 {
				t.Fatalf("%d watches opened: the test did not end any watch before the wait was over", n)
			}
			relists := tc.goneEvent
			for _, err := range tc.openErr {
				relists = relists || apierrors.IsResourceExpired(err)
			}
			if n := fw.lists.Load(); relists && n < 2 {
				t.Fatalf("%d lists: a watch that was too old did not make the wait list again", n)
			}
			t.Logf("%d watches opened, %d lists", fw.opened.Load(), fw.lists.Load())
		})
	}
}

// A wait that ctx ends, however often its watches end, says how far it got and why it ended (it once
// said "%!w(<nil>)" as soon as a watch ended).
func TestWaitForReportsWhyItEnded(t *testing.T) {
	testenv.Require(t, env)
	c := newClient(t)
	ns := env.Namespace(t)
	createPartitions(t, c, ns, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	fw := &flakyWatch{WithWatch: c, after: 0, firstOpened: make(chan struct{})} // every watch ends at once
	never := func(s *sharestatev1.SharePartitionState) bool { return s.Status.StateEpoch >= 2 }
	_, err := fencebench.WaitFor(ctx, fw, ns, 3, never)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the wait returned %v, want an error wrapping context.DeadlineExceeded", err)
	}
	t.Log(err)
	if msg := err.Error(); strings.Contains(msg, "%!") || !strings.Contains(msg, "0 of 3") {
		t.Fatalf("the wait's error says %q", msg)
	}
}

func newClient(t *testing.T) client.WithWatch {
	t.Helper()
	c, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createPartitions creates n initialized partitions at state epoch 1 and returns their names.
func createPartitions(t *testing.T, c client.Client, ns string, n int) []string {
	t.Helper()
	const topic = "q1Sh0o2QRbuBzMz8vEMbvQ"
	var names []string
	for i := range int32(n) {
		sps := &sharestatev1.SharePartitionState{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.SharePartitionStateName("watch", topic, i)},
			Spec:       sharestatev1.SharePartitionStateSpec{GroupID: "watch", TopicID: topic, Partition: i},
		}
		if err := c.Create(context.Background(), sps); err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		sps.Status = sharestatev1.SharePartitionStateStatus{StateEpoch: 1, LeaderEpoch: 1, StartOffset: 0, CreateTime: &now, WriteTime: &now}
		if err := c.Status().Update(context.Background(), sps); err != nil {
			t.Fatal(err)
		}
		names = append(names, sps.Name)
	}
	return names
}

func raiseStateEpoch(c client.Client, ns, name string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sps sharestatev1.SharePartitionState
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sps); err != nil {
			return err
		}
		sps.Status.StateEpoch = 2
		return c.Status().Update(context.Background(), &sps)
	})
}

// flakyWatch is a client whose watches end early: each one delivers after events and then ends,
// quietly or (goneEvent) with a 410 Gone error event, as an API server's watch may. openErr fails the
// opening of the watches it numbers (from 1). firstOpened is closed when the first watch opens.
type flakyWatch struct {
	client.WithWatch
	after       int
	goneEvent   bool
	openErr     map[int32]error
	firstOpened chan struct{}

	opened atomic.Int32
	lists  atomic.Int32
}

func (f *flakyWatch) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	f.lists.Add(1)
	return f.WithWatch.List(ctx, list, opts...)
}

func (f *flakyWatch) Watch(ctx context.Context, list client.ObjectList, opts ...client.ListOption) (watch.Interface, error) {
	n := f.opened.Add(1)
	if err := f.openErr[n]; err != nil {
		return nil, err
	}
	w, err := f.WithWatch.Watch(ctx, list, opts...)
	if err != nil {
		return nil, err
	}
	if n == 1 {
		close(f.firstOpened)
	}
	return cutShort(w, f.after, f.goneEvent), nil
}

// cutShort forwards after events of w, then stops w and ends, after a 410 Gone event if gone.
func cutShort(w watch.Interface, after int, gone bool) watch.Interface {
	out := make(chan watch.Event)
	stop := make(chan struct{})
	go func() {
		defer close(out)
		defer w.Stop()
		send := func(ev watch.Event) bool {
			select {
			case out <- ev:
				return true
			case <-stop:
				return false
			}
		}
		for range after {
			var ev watch.Event
			var ok bool
			select {
			case ev, ok = <-w.ResultChan():
			case <-stop:
				return
			}
			if !ok || !send(ev) {
				return
			}
		}
		if gone {
			status := apierrors.NewResourceExpired("the resourceVersion is too old").Status()
			send(watch.Event{Type: watch.Error, Object: &status})
		}
	}()
	return &shortWatch{out: out, stop: stop}
}

type shortWatch struct {
	out     chan watch.Event
	stop    chan struct{}
	stopped sync.Once
}

func (s *shortWatch) ResultChan() <-chan watch.Event { return s.out }
func (s *shortWatch) Stop()                          { s.stopped.Do(func() { close(s.stop) }) }
