package operator

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sharestate/sharestate-operator/internal/metricsreg"
)

// The operator's watch of SharePartitionStates receives every persister write as an event holding
// the whole object, and client-go scans each event's JSON several times before the cache transform
// (controllers.SlimPartitionState) drops most of it: the framing, the event's envelope, the object's
// kind, a validity scan, then the decoding itself. Two fields are most of an event and the operator
// never reads them: metadata.managedFields, which every cached kind drops, and status.stateBatches,
// whose one figure the operator needs the persister keeps in status.inFlightRecords. At 10,000
// partitions decoding the events was two thirds of the operator's CPU. watchTrimmer cuts both fields
// out of each event before client-go sees it, with a byte scanner that only finds where values end,
// so that client-go decodes the third of the bytes that is left.
//
// The batches are cut only from a status that holds inFlightRecords (one written by a persister that
// keeps it): from any other the transform still counts them. Everything else of the event is passed
// on byte for byte. An event the scanner cannot read (never seen from an API server) ends the
// trimming of its watch: it and all that follows pass untouched, for client-go to judge.

// watchTrimmer wraps the operator's transport so that the JSON watches of SharePartitionStates reach
// client-go without the fields the operator's cache drops. Every other request and response passes
// as it is.
type watchTrimmer struct {
	kept, trimmed prometheus.Counter
	decoded       prometheus.Counter // events given to the operator's own decoder (watchdecode.go)
}

// newWatchTrimmer registers the trimmer's metrics on reg (nil: none).
func newWatchTrimmer(reg prometheus.Registerer) (*watchTrimmer, error) {
	bytesTotal := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_operator_partition_watch_bytes_total",
		Help: "Bytes of SharePartitionState watch events received, by part: kept for decoding, or trimmed " +
			"before it (managedFields, and state batches the persister's in-flight count stands for).",
	}, []string{"part"})
	decoded := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sharestate_operator_partition_watch_events_total",
		Help: "SharePartitionState watch events the operator decoded itself, from the trimmed stream.",
	})
	var err error
	metricsreg.Into(reg, &err, &bytesTotal)
	metricsreg.Into(reg, &err, &decoded)
	return &watchTrimmer{kept: bytesTotal.WithLabelValues("kept"), trimmed: bytesTotal.WithLabelValues("trimmed"), decoded: decoded}, err
}

// wrap is a rest.Config WrapTransport.
func (w *watchTrimmer) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || !isPartitionWatch(req) || !trimmable(resp) {
			return resp, err
		}
		body := &trimReader{src: resp.Body, counts: w}
		if tapEvents(req, body) {
			resp.Body = http.NoBody // the operator's informer decodes the events (watchdecode.go)
		} else {
			resp.Body = body
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// isPartitionWatch reports whether req watches SharePartitionStates: a GET of the collection
// (cluster-wide or in a namespace) with watch set. The API's path may follow a prefix of the
// server's URL (an API server behind a proxy).
func isPartitionWatch(req *http.Request) bool {
	if req.Method != http.MethodGet || !strings.Contains(req.URL.Path, "/apis/sharestate.dev/") ||
		!strings.HasSuffix(req.URL.Path, "/sharepartitionstates") {
		return false
	}
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// trimmable reports whether resp is a successful, uncompressed JSON stream.
func trimmable(resp *http.Response) bool {
	return resp.StatusCode == http.StatusOK && resp.Header.Get("Content-Encoding") == "" &&
		strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
}

// trimReader reads a stream of JSON watch events from src and gives them out trimmed, each as soon
// as it has arrived whole: as a byte stream (Read, for client-go's decoder) or an event at a time
// (nextEvent, for the operator's own, watchdecode.go). A trimReader is read one way only.
type trimReader struct {
	src       io.ReadCloser
	in        []byte        // read from src, not yet a whole event
	out       []byte        // trimmed, not yet read
	ends      []int         // the length in out of each whole event in it, with the whitespace before it
	scratch   []byte        // the buffer out is built in
	untrimmed bool          // the stream held what the scanner cannot read: the rest passes as it is
	rest      *json.Decoder // frames the events of an untrimmed stream, for nextEvent
	counts    *watchTrimmer
	err       error // src's error, given out once in and out are empty
}

// readChunk is how much trimReader asks of its source at a time: the most an HTTP/2 data frame
// carries by default, so that an ordinary event arrives in one read.
const readChunk = 16 << 10

func (r *trimReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		switch {
		case r.err != nil && len(r.in) > 0: // the stream ended inside an event: client-go reports it
			r.out, r.in = r.in, nil
		case r.err != nil:
			return 0, r.err
		case r.untrimmed:
			n, err := r.src.Read(p)
			r.counts.kept.Add(float64(n))
			return n, err
		default:
			r.fill()
		}
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	r.counts.kept.Add(float64(n))
	return n, nil
}

// fill reads once from the source and moves every whole event received to out, trimmed.
func (r *trimReader) fill() {
	// fill runs once everything out held has been read: the events' lengths go with it (Read, which
	// does not use them, would otherwise let them pile up).
	r.ends = r.ends[:0]
	if cap(r.in)-len(r.in) < readChunk {
		grown := make([]byte, len(r.in), 2*cap(r.in)+readChunk)
		copy(grown, r.in)
		r.in = grown
	}
	n, err := r.src.Read(r.in[len(r.in):cap(r.in)])
	chunk := r.in[len(r.in) : len(r.in)+n]
	r.in = r.in[:len(r.in)+n]
	r.err = err
	// The API server ends each event with a newline. Without one, and without a closing brace at the
	// end, no event has ended in this chunk: a large event is not scanned again at each of its pieces.
	if err == nil && bytes.IndexByte(chunk, '\n') < 0 && (n == 0 || chunk[n-1] != '}') {
		return
	}
	r.out = r.scratch[:0]
	rest := 0
	for {
		start := skipSpace(r.in, rest)
		if start == len(r.in) {
			break
		}
		end, cuts, err := scanEvent(r.in, start)
		if errors.Is(err, errIncomplete) {
			break
		}
		if err != nil {
			r.untrimmed = true
			break
		}
		before := len(r.out)
		r.out = append(r.out, r.in[rest:start]...)
		r.out = cuts.appendKept(r.out, r.in[:end], start)
		r.ends = append(r.ends, len(r.out)-before)
		rest = end
	}
	if r.untrimmed {
		r.out = append(r.out, r.in[rest:]...)
		rest = len(r.in)
	}
	r.counts.trimmed.Add(float64(rest - len(r.out)))
	r.scratch = r.out
	// What is left is the beginning of an event: keep it at the front for the next read.
	r.in = r.in[:copy(r.in, r.in[rest:])]
}

// nextEvent returns the stream's next event, trimmed and without the whitespace around it; its bytes
// are the reader's until the next call. The stream's end is io.EOF, an end inside an event
// io.ErrUnexpectedEOF, as client-go's framer reports them. After an event the scanner cannot read,
// the events that follow are framed by encoding/json and given out untrimmed.
func (r *trimReader) nextEvent() ([]byte, error) {
	for len(r.ends) == 0 {
		switch {
		case r.untrimmed:
			return r.nextUntrimmed()
		case errors.Is(r.err, io.EOF) && skipSpace(r.in, 0) < len(r.in):
			return nil, io.ErrUnexpectedEOF
		case r.err != nil:
			return nil, r.err
		default:
			r.fill()
		}
	}
	n := r.ends[0]
	event := r.out[skipSpace(r.out[:n], 0):n]
	r.out, r.ends = r.out[n:], r.ends[1:]
	r.counts.kept.Add(float64(len(event)))
	r.counts.decoded.Inc()
	return event, nil
}

// nextUntrimmed frames the next event of what follows an event the scanner could not read: what
// fill left in out, then the source.
func (r *trimReader) nextUntrimmed() ([]byte, error) {
	if r.rest == nil {
		left := bytes.Clone(r.out)
		r.out = nil
		src := io.Reader(bytes.NewReader(left))
		if r.err == nil {
			src = io.MultiReader(src, r.src)
		} else if !errors.Is(r.err, io.EOF) {
			src = io.MultiReader(src, errReader{r.err})
		}
		r.rest = json.NewDecoder(src)
	}
	var event json.RawMessage
	if err := r.rest.Decode(&event); err != nil {
		return nil, err
	}
	r.counts.kept.Add(float64(len(event)))
	r.counts.decoded.Inc()
	return event, nil
}

func (r *trimReader) Close() error { return r.src.Close() }

// errReader is a source that has failed.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
