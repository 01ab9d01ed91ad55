package operator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	restclientwatch "k8s.io/client-go/rest/watch"
	toolscache "k8s.io/client-go/tools/cache"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// clientGoDecoder decodes a stream of watch events as the operator's informer did before it decoded
// them itself, with the decoders client-go's REST client picks for a JSON watch (k8s.io/client-go
// v0.37.2, rest/request.go, newStreamWatcher, and the client negotiator's StreamDecoder): its JSON
// framer, the envelope, then the object, whose apiVersion and kind are cleared.
func clientGoDecoder(t testing.TB, stream []byte) *restclientwatch.Decoder {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := sharestatev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	body := io.NopCloser(bytes.NewReader(stream))
	events := streaming.NewDecoder(info.StreamSerializer.NewFrameReader(body), info.StreamSerializer.Serializer)
	return restclientwatch.NewDecoder(events, codecs.DecoderToVersion(info.Serializer, sharestatev1.GroupVersion))
}

func eventReader(t testing.TB, src io.Reader) *trimReader {
	trimmer, err := newWatchTrimmer(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &trimReader{src: io.NopCloser(src), counts: trimmer}
}

// Every event the operator decodes is what client-go decodes from the same trimmed stream: the scale
// bench's event, its bookmark, its deletion, and events cut short of most of their fields.
func TestPartitionEventsDecodeAsClientGoDecodes(t *testing.T) {
	full := bytes.TrimSuffix(benchEvent(t), []byte("\n"))
	var stream bytes.Buffer
	for _, ev := range []string{
		string(full),
		strings.Replace(string(full), `"MODIFIED"`, `"ADDED"`, 1),
		strings.Replace(string(full), `"MODIFIED"`, `"DELETED"`, 1),
		`{"type":"BOOKMARK","object":{"kind":"SharePartitionState","apiVersion":"sharestate.dev/v1alpha1","metadata":{"resourceVersion":"12","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}},"spec":{"groupId":"","topicId":"","partition":0},"status":{}}}`,
		`{"type":"MODIFIED","object":{"kind":"SharePartitionState","apiVersion":"sharestate.dev/v1alpha1","metadata":{"name":"p","namespace":"n"},"status":{"stateEpoch":4,"leaderEpoch":2,"startOffset":-1}}}`,
		`{"object":{"apiVersion":"sharestate.dev/v1alpha1","kind":"SharePartitionState","metadata":{"name":"q","labels":{"a":"b"}},"spec":{"partition":3}},"type":"ADDED"}`,
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}`,
	} {
		stream.WriteString(ev + "\n")
	}
	got := eventReader(t, bytes.NewReader(stream.Bytes()))
	trimmedStream, err := io.ReadAll(eventReader(t, bytes.NewReader(stream.Bytes())))
	if err != nil {
		t.Fatal(err)
	}
	want := clientGoDecoder(t, trimmedStream)
	for i := 0; ; i++ {
		wantType, wantObject, wantErr := want.Decode()
		data, err := got.nextEvent()
		if wantErr != nil || err != nil {
			if !errors.Is(wantErr, io.EOF) || !errors.Is(err, io.EOF) {
				t.Fatalf("event %d: client-go %v, the operator %v", i, wantErr, err)
			}
			return
		}
		event, err := decodePartitionEvent(data)
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if event.Type != wantType || !equality.Semantic.DeepEqual(event.Object, wantObject) {
			t.Fatalf("event %d: decoded\n%s %#v\nclient-go\n%s %#v", i, event.Type, event.Object, wantType, wantObject)
		}
	}
}

// An event client-go would refuse is refused, with what client-go says of it.
func TestPartitionEventsRefused(t *testing.T) {
	for _, tc := range []struct{ name, event, want string }{
		{"unknown type", `{"type":"CHANGED","object":{"kind":"SharePartitionState","apiVersion":"sharestate.dev/v1alpha1"}}`, "got invalid watch event type: CHANGED"},
		{"no type", `{"object":{"kind":"SharePartitionState","apiVersion":"sharestate.dev/v1alpha1"}}`, "got invalid watch event type: "},
		{"another kind", `{"type":"ADDED","object":{"kind":"ShareGroup","apiVersion":"sharestate.dev/v1alpha1"}}`, `its object is a "ShareGroup" of "sharestate.dev/v1alpha1"`},
		{"no kind", `{"type":"ADDED","object":{"metadata":{"name":"p"}}}`, "not a SharePartitionState"},
		{"a field of the wrong type", `{"type":"MODIFIED","object":{"kind":"SharePartitionState","apiVersion":"sharestate.dev/v1alpha1","status":{"stateEpoch":"2"}}}`, "unable to decode watch event"},
		{"not JSON", `{"type":"MODIFIED","object":`, "unable to decode watch event"},
		{"an error without a status", `{"type":"ERROR","object":[]}`, "unable to decode watch event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			event, err := decodePartitionEvent([]byte(tc.event))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decoded %v (%v), want an error with %q", event, err, tc.want)
			}
		})
	}
}

// Read, for client-go, keeps no record of the events it has given out.
func TestTrimReaderReadKeepsNoEventLengths(t *testing.T) {
	event := `{"type":"ADDED","object":{"metadata":{"managedFields":[]}}}` + "\n"
	r := eventReader(t, iotest.OneByteReader(strings.NewReader(strings.Repeat(event, 100))))
	if _, err := io.ReadAll(r); err != nil {
		t.Fatal(err)
	}
	if len(r.ends) > 1 {
		t.Fatalf("after 100 events read whole, %d lengths kept", len(r.ends))
	}
}

// nextEvent gives out the events Read would, one at a time, however the stream arrives.
func TestTrimReaderEventByEvent(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var stream bytes.Buffer
	var want []string
	for range 200 {
		ev := render(rng, randomEvent(rng))
		stream.WriteString(ev + "\n")
		want = append(want, trimmed(t, ev))
	}
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"random":   func(r io.Reader) io.Reader { return &choppyReader{r: r, rng: rng} },
	} {
		t.Run(name, func(t *testing.T) {
			r := eventReader(t, wrap(bytes.NewReader(stream.Bytes())))
			for i, w := range want {
				got, err := r.nextEvent()
				if err != nil || string(got) != w {
					t.Fatalf("event %d: %s (%v), want %s", i, got, err, w)
				}
			}
			if got, err := r.nextEvent(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last event: %s (%v), want io.EOF", got, err)
			}
		})
	}
	t.Run("after an event the scanner cannot read", func(t *testing.T) {
		// The scanner reads only objects; encoding/json frames what follows and it is given out as it is.
		first := `{"type":"ADDED","object":{"metadata":{"managedFields":[]}}}`
		in := first + "\n[]\n" + first + "\n" + `{"type":"ADDED","object":]}` + "\n"
		r := eventReader(t, iotest.OneByteReader(strings.NewReader(in)))
		for i, w := range []string{trimmed(t, first), "[]", first} {
			got, err := r.nextEvent()
			if err != nil || string(got) != w {
				t.Fatalf("event %d: %s (%v), want %s", i, got, err, w)
			}
		}
		if got, err := r.nextEvent(); err == nil || errors.Is(err, io.EOF) {
			t.Fatalf("an event that is not JSON: %s (%v), want a syntax error", got, err)
		}
	})
	t.Run("cut short", func(t *testing.T) {
		first := `{"type":"ADDED","object":{"metadata":{"managedFields":[]}}}`
		r := eventReader(t, iotest.DataErrReader(strings.NewReader(first+"\n"+`{"type":"ADDED","obj`)))
		if got, err := r.nextEvent(); err != nil || string(got) != trimmed(t, first) {
			t.Fatalf("first event: %s (%v)", got, err)
		}
		if got, err := r.nextEvent(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("the event cut short: %s (%v), want io.ErrUnexpectedEOF", got, err)
		}
	})
}

// The watcher gives out the stream's events and ends as client-go's does: quietly at the stream's
// end, with an ERROR event (a Status 500) at an event it cannot decode, and at once when stopped.
func TestPartitionWatcher(t *testing.T) {
	const modified = `{"type":"MODIFIED","object":{"kind":"SharePartitionState","apiVersion":"sharestate.dev/v1alpha1","metadata":{"name":"p","managedFields":[{"manager":"m"}]},"status":{"stateEpoch":2,"leaderEpoch":0,"startOffset":-1}}}`
	t.Run("the stream's end", func(t *testing.T) {
		w := newPartitionWatcher(eventReader(t, strings.NewReader(modified+"\n"+modified+"\n")))
		for range 2 {
			ev := <-w.ResultChan()
			if sps, ok := ev.Object.(*sharestatev1.SharePartitionState); ev.Type != watch.Modified || !ok || sps.Name != "p" ||
				sps.Status.StateEpoch != 2 || len(sps.ManagedFields) != 0 || sps.Kind != "" {
				t.Fatalf("got %s %#v", ev.Type, ev.Object)
			}
		}
		if ev, open := <-w.ResultChan(); open {
			t.Fatalf("after the stream's end: %v", ev)
		}
	})
	t.Run("an event it cannot decode", func(t *testing.T) {
		w := newPartitionWatcher(eventReader(t, strings.NewReader(modified+"\n"+`{"type":"CHANGED","object":{}}`+"\n"+modified+"\n")))
		if ev := <-w.ResultChan(); ev.Type != watch.Modified {
			t.Fatalf("first: %v", ev)
		}
		ev := <-w.ResultChan()
		status, ok := ev.Object.(*metav1.Status)
		if ev.Type != watch.Error || !ok || status.Code != http.StatusInternalServerError ||
			!strings.Contains(status.Message, "got invalid watch event type: CHANGED") {
			t.Fatalf("second: %s %#v", ev.Type, ev.Object)
		}
		if err := apierrors.FromObject(ev.Object); !apierrors.IsInternalError(err) {
			t.Fatalf("the reflector reads it as %v, want an internal error", err)
		}
		if ev, open := <-w.ResultChan(); open {
			t.Fatalf("after the error: %v", ev)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		src, feed := io.Pipe()
		go func() { _, _ = feed.Write([]byte(modified + "\n")) }()
		w := newPartitionWatcher(&trimReader{src: src, counts: eventReader(t, nil).counts})
		if ev := <-w.ResultChan(); ev.Type != watch.Modified {
			t.Fatalf("first: %v", ev)
		}
		w.Stop() // the watcher waits on the stream: closing it ends the wait
		select {
		case ev, open := <-w.ResultChan():
			if open {
				t.Fatalf("after Stop: %v", ev)
			}
		case <-time.After(time.Minute):
			t.Fatal("the watch did not end after Stop")
		}
		w.Stop() // a second Stop does nothing
	})
}

// The informer's watch takes the trimmed stream from the transport when the trimmer took the
// response, and leaves it to client-go when it did not.
func TestPartitionListWatchTapsTheTrimmedStream(t *testing.T) {
	event := `{"type":"ADDED","object":{"kind":"SharePartitionState","apiVersion":"sharestate.dev/v1alpha1","metadata":{"name":"p","managedFields":[{"manager":"m"}]}}}` + "\n"
	for _, tc := range []struct {
		name, encoding string
		tapped         bool
	}{
		{"plain", "", true},
		{"compressed", "gzip", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			trimmer, err := newWatchTrimmer(nil)
			if err != nil {
				t.Fatal(err)
			}
			rt := trimmer.wrap(roundTripper(func(req *http.Request) (*http.Response, error) {
				h := http.Header{"Content-Type": {"application/json"}}
				if tc.encoding != "" {
					h.Set("Content-Encoding", tc.encoding)
				}
				return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(strings.NewReader(event)), Request: req}, nil
			}))
			var clientGoBody []byte
			inner := &toolscache.ListWatch{WatchFuncWithContext: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
				u, _ := url.Parse("https://api/apis/sharestate.dev/v1alpha1/namespaces/n/sharepartitionstates?watch=true")
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
				resp, err := rt.RoundTrip(req)
				if err != nil {
					return nil, err
				}
				clientGoBody, _ = io.ReadAll(resp.Body)
				return watch.NewEmptyWatch(), nil
			}}
			w, err := (&partitionListWatch{inner: inner}).WatchWithContext(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			_, tapped := w.(*partitionWatcher)
			if tapped != tc.tapped || (len(clientGoBody) == 0) != tc.tapped {
				t.Fatalf("tapped %v with %d bytes left to client-go, want tapped %v", tapped, len(clientGoBody), tc.tapped)
			}
			if !tapped {
				return
			}
			if ev := <-w.ResultChan(); ev.Type != watch.Added || ev.Object.(*sharestatev1.SharePartitionState).Name != "p" {
				t.Fatalf("got %v", ev)
			}
		})
	}
}

// BenchmarkPartitionEventDecode is the operator's decoding of the scale bench's trimmed event, beside
// client-go's decoding of the same bytes (BenchmarkPartitionWatchDecode/trimmed also trims them).
func BenchmarkPartitionEventDecode(b *testing.B) {
	event := appendTrimmed(nil, bytes.TrimSuffix(benchEvent(b), []byte("\n")))
	b.Run("client-go", func(b *testing.B) {
		stream := bytes.Repeat(append(bytes.Clone(event), '\n'), 1000)
		b.SetBytes(int64(len(event)))
		b.ReportAllocs()
		for i := 0; i < b.N; {
			dec := clientGoDecoder(b, stream)
			for ; i < b.N; i++ {
				if _, _, err := dec.Decode(); err != nil {
					if errors.Is(err, io.EOF) {
						break
					}
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("operator", func(b *testing.B) {
		b.SetBytes(int64(len(event)))
		b.ReportAllocs()
		for b.Loop() {
			if ev, err := decodePartitionEvent(event); err != nil || ev.Object.(*sharestatev1.SharePartitionState).Status.StateEpoch != 3 {
				b.Fatal(err)
			}
		}
	})
}
