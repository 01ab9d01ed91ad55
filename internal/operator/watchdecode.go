package operator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	sigsjson "sigs.k8s.io/json"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// Once trimmed (watchtrim.go), a partition's watch event is still decoded by client-go in about seven
// passes over its bytes: its JSON framer reads the event as a raw value (one scan), the serializer
// finds the event's kind (a validity scan and a decoding), decodes the envelope with the object as raw
// bytes (two more), then the object (two more). At 10,000 partitions that was about two fifths of the
// operator's CPU. The trimmer already knows where each event ends, so the informer of
// SharePartitionStates takes its events from the trimmer one at a time and decodes each in a single
// call into the typed object (sigs.k8s.io/json, the case-sensitive decoder client-go's own JSON
// serializer uses: k8s.io/apimachinery v0.37.2, pkg/runtime/serializer/json/json.go), for about a
// third of the CPU.
//
// The request is still client-go's (its URL, parameters, authentication, retries and error
// statuses): the informer's watch calls client-go's, and the transport hands the trimmed body of the
// successful response to the informer instead of to client-go, which is given an empty body. A
// response the trimmer does not take (compressed, not JSON) is decoded by client-go as before.

// newInformer is the cache's NewInformer: the informer of SharePartitionStates decodes its own watch
// events; every informer is client-go's shared index informer.
func newInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if _, ok := obj.(*sharestatev1.SharePartitionState); ok {
		lw = &partitionListWatch{inner: toolscache.ToListerWatcherWithContext(lw)}
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

// partitionListWatch lists through client-go and watches through it too, but decodes the events of a
// trimmed watch itself.
type partitionListWatch struct {
	inner toolscache.ListerWatcherWithContext
}

func (lw *partitionListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

func (lw *partitionListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	return lw.inner.ListWithContext(ctx, opts)
}

func (lw *partitionListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

func (lw *partitionListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	tap := &eventTap{}
	w, err := lw.inner.WatchWithContext(context.WithValue(ctx, eventTapKey{}, tap), opts)
	if err != nil {
		return nil, err
	}
	events := tap.events.Load()
	if events == nil {
		return w, nil // the trimmer did not take the response: client-go decodes it
	}
	w.Stop() // client-go's watcher was given an empty body: it has ended, or ends now
	return newPartitionWatcher(events), nil
}

// eventTap is how a watch asks the transport for its response's events: the transport stores the
// trimmed body of a successful watch here instead of giving it to client-go.
type eventTap struct {
	events atomic.Pointer[trimReader]
}

type eventTapKey struct{}

// tapEvents gives body to the watch that asked for it in req's context, and reports whether it did.
func tapEvents(req *http.Request, body *trimReader) bool {
	tap, ok := req.Context().Value(eventTapKey{}).(*eventTap)
	if !ok {
		return false
	}
	tap.events.Store(body)
	return true
}

// watchDecodingErrors reports an event that cannot be decoded as client-go's watch does (k8s.io/client-go
// v0.37.2, rest/request.go, newStreamWatcher): a Status 500, which the reflector answers by watching
// again.
var watchDecodingErrors = apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")

// partitionWatcher is a watch.Interface over a trimmed stream of SharePartitionState events. It ends
// as client-go's StreamWatcher does (k8s.io/apimachinery v0.37.2, pkg/watch/streamwatcher.go,
// receive): quietly at the stream's end or when stopped, with an ERROR event when an event cannot be
// decoded.
type partitionWatcher struct {
	events   *trimReader
	result   chan watch.Event
	done     chan struct{}
	stopOnce sync.Once
}

func newPartitionWatcher(events *trimReader) *partitionWatcher {
	w := &partitionWatcher{events: events, result: make(chan watch.Event), done: make(chan struct{})}
	go w.receive()
	return w
}

func (w *partitionWatcher) ResultChan() <-chan watch.Event { return w.result }

// Stop ends the watch: the stream is closed, which ends a read that is waiting on it.
func (w *partitionWatcher) Stop() {
	w.stopOnce.Do(func() {
		close(w.done)
		_ = w.events.Close()
	})
}

func (w *partitionWatcher) receive() {
	defer close(w.result)
	defer w.Stop()
	for {
		event, err := w.next()
		if err != nil {
			if !endsQuietly(err) {
				w.send(watch.Event{Type: watch.Error,
					Object: watchDecodingErrors.AsObject(fmt.Errorf("unable to decode an event from the watch stream: %w", err))})
			}
			return
		}
		if !w.send(event) {
			return
		}
	}
}

func (w *partitionWatcher) next() (watch.Event, error) {
	data, err := w.events.nextEvent()
	if err != nil {
		return watch.Event{}, err
	}
	return decodePartitionEvent(data)
}

// send gives event to the reader of the watch, unless the watch is stopped first. A watch stopped
// before the event came sends nothing: Stop closes the stream, and the read it ends is no ERROR.
func (w *partitionWatcher) send(event watch.Event) bool {
	select {
	case <-w.done:
		return false
	default:
	}
	select {
	case <-w.done:
		return false
	case w.result <- event:
		return true
	}
}

// endsQuietly reports whether err ends a watch without an ERROR event: the stream's end, or the
// connection's (client-go's StreamWatcher logs these and stops).
func endsQuietly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
}

// partitionEvent is a watch event whose object is a SharePartitionState (ADDED, MODIFIED, DELETED,
// BOOKMARK).
type partitionEvent struct {
	Type   watch.EventType                  `json:"type"`
	Object sharestatev1.SharePartitionState `json:"object"`
}

// errorEvent is an ERROR event: its object is a Status.
type errorEvent struct {
	Type   watch.EventType `json:"type"`
	Object metav1.Status   `json:"object"`
}

// decodePartitionEvent decodes one watch event as client-go's watch decoder would
// (k8s.io/client-go v0.37.2, rest/watch/decoder.go): its type must be one of the five, its object is
// typed by its kind, and the decoded object's apiVersion and kind are cleared, as client-go's decoder
// clears them (k8s.io/apimachinery v0.37.2, pkg/runtime/helper.go, WithoutVersionDecoder).
func decodePartitionEvent(data []byte) (watch.Event, error) {
	var ev partitionEvent
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &ev)
	switch ev.Type {
	case watch.Error: // its object is a Status, which the decoding into a partition may have refused
		var status errorEvent
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &status); err != nil {
			return watch.Event{}, fmt.Errorf("unable to decode watch event: %w", err)
		}
		status.Object.TypeMeta = metav1.TypeMeta{}
		return watch.Event{Type: watch.Error, Object: &status.Object}, nil
	case watch.Added, watch.Modified, watch.Deleted, watch.Bookmark:
	default:
		if err != nil {
			return watch.Event{}, fmt.Errorf("unable to decode watch event: %w", err)
		}
		return watch.Event{}, fmt.Errorf("got invalid watch event type: %v", ev.Type)
	}
	if err != nil {
		return watch.Event{}, fmt.Errorf("unable to decode watch event: %w", err)
	}
	if gvk := ev.Object.GroupVersionKind(); gvk != sharestatev1.GroupVersion.WithKind("SharePartitionState") {
		return watch.Event{}, fmt.Errorf("unable to decode watch event: its object is a %q of %q, not a SharePartitionState", gvk.Kind, gvk.GroupVersion())
	}
	ev.Object.TypeMeta = metav1.TypeMeta{}
	return watch.Event{Type: ev.Type, Object: &ev.Object}, nil
}
