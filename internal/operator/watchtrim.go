package operator

import (
	"bytes"
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
// partitions that scanning was two thirds of the operator's CPU. trimmedPartitionWatches cuts both
// fields out of each event before client-go sees it, with one pass of a byte scanner that only
// finds where values end, so that the decoding works on the third of the bytes that is left.
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
}

// newWatchTrimmer registers the trimmer's metrics on reg (nil: none).
func newWatchTrimmer(reg prometheus.Registerer) (*watchTrimmer, error) {
	bytesTotal := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_operator_partition_watch_bytes_total",
		Help: "Bytes of SharePartitionState watch events received, by part: kept for decoding, or trimmed " +
			"before it (managedFields, and state batches the persister's in-flight count stands for).",
	}, []string{"part"})
	var err error
	metricsreg.Into(reg, &err, &bytesTotal)
	return &watchTrimmer{kept: bytesTotal.WithLabelValues("kept"), trimmed: bytesTotal.WithLabelValues("trimmed")}, err
}

// wrap is a rest.Config WrapTransport.
func (w *watchTrimmer) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || !isPartitionWatch(req) || !trimmable(resp) {
			return resp, err
		}
		resp.Body = &trimReader{src: resp.Body, counts: w}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// isPartitionWatch reports whether req watches SharePartitionStates: a GET of the collection
// (cluster-wide or in a namespace) with watch set.
func isPartitionWatch(req *http.Request) bool {
	if req.Method != http.MethodGet || !strings.HasPrefix(req.URL.Path, "/apis/sharestate.dev/") ||
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
// as it has arrived whole.
type trimReader struct {
	src       io.ReadCloser
	in        []byte   // read from src, not yet a whole event
	out       []byte   // trimmed, not yet read
	scratch   []byte   // the buffer out is built in
	members   []member // the buffer an object's members are listed in
	untrimmed bool     // the stream held what the scanner cannot read: the rest passes as it is
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
		end, err := valueEnd(r.in, start)
		if errors.Is(err, errIncomplete) {
			break
		}
		if err != nil {
			r.untrimmed = true
			break
		}
		r.out = append(r.out, r.in[rest:start]...)
		r.out = r.appendTrimmed(r.out, r.in[start:end])
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

func (r *trimReader) Close() error { return r.src.Close() }

// appendTrimmed appends the watch event ev to dst without object.metadata.managedFields, and
// without object.status.stateBatches where object.status holds inFlightRecords.
func (r *trimReader) appendTrimmed(dst, ev []byte) []byte {
	var cuts [2]span
	if r.list(ev, 0) {
		if object, ok := r.objectValue(ev, "object"); ok && r.list(ev, object) {
			metadata, hasMetadata := r.objectValue(ev, "metadata")
			status, hasStatus := r.objectValue(ev, "status")
			if hasMetadata && r.list(ev, metadata) {
				cuts[0] = r.cut("managedFields")
			}
			if hasStatus && r.list(ev, status) {
				if i := r.find("inFlightRecords"); i >= 0 && string(ev[r.members[i].value.start:r.members[i].value.end]) != "null" {
					cuts[1] = r.cut("stateBatches")
				}
			}
		}
	}
	if cuts[1].start < cuts[0].start {
		cuts[0], cuts[1] = cuts[1], cuts[0]
	}
	from := 0
	for _, c := range cuts {
		if c.end > c.start {
			dst = append(dst, ev[from:c.start]...)
			from = c.end
		}
	}
	return append(dst, ev[from:]...)
}

// span is [start, end) of a byte slice; the zero span is empty.
type span struct{ start, end int }

// member is one "key": value of an object, its key as written (a key spelled with escapes is not
// recognised: then nothing is cut).
type member struct {
	key   []byte
	start int  // the key's opening quote
	value span // its value
}

// list makes r.members the members of the object at b[obj]; false if it is not a whole object.
func (r *trimReader) list(b []byte, obj int) bool {
	var err error
	r.members, err = appendMembers(r.members[:0], b, obj)
	return err == nil
}

// find returns the index in r.members of the first member named key, or -1.
func (r *trimReader) find(key string) int {
	for i, m := range r.members {
		if string(m.key) == key {
			return i
		}
	}
	return -1
}

// objectValue returns where the value of r.members' member key starts, if that value is an object.
func (r *trimReader) objectValue(b []byte, key string) (int, bool) {
	i := r.find(key)
	if i < 0 || b[r.members[i].value.start] != '{' {
		return 0, false
	}
	return r.members[i].value.start, true
}

// cut returns the span that removes r.members' member key from their object, together with the
// comma that parts it from a neighbour; empty when there is no such member.
func (r *trimReader) cut(key string) span {
	i := r.find(key)
	switch {
	case i < 0:
		return span{}
	case i > 0: // from the end of the value before it
		return span{r.members[i-1].value.end, r.members[i].value.end}
	case len(r.members) > 1: // the first of several: up to the next key
		return span{r.members[0].start, r.members[1].start}
	default:
		return span{r.members[0].start, r.members[0].value.end}
	}
}

var (
	errMalformed  = errors.New("not a JSON value")
	errIncomplete = errors.New("the JSON value goes on past the bytes received")
)

// appendMembers appends the members of the object at b[obj] to dst.
func appendMembers(dst []member, b []byte, obj int) ([]member, error) {
	if obj >= len(b) || b[obj] != '{' {
		return dst, errMalformed
	}
	i := skipSpace(b, obj+1)
	if i < len(b) && b[i] == '}' {
		return dst, nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return dst, errMalformed
		}
		keyEnd, err := stringEnd(b, i)
		if err != nil {
			return dst, err
		}
		colon := skipSpace(b, keyEnd)
		if colon >= len(b) || b[colon] != ':' {
			return dst, errMalformed
		}
		start := skipSpace(b, colon+1)
		end, err := valueEnd(b, start)
		if err != nil {
			return dst, err
		}
		dst = append(dst, member{key: b[i+1 : keyEnd-1], start: i, value: span{start, end}})
		i = skipSpace(b, end)
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '}':
			return dst, nil
		case ',':
			i = skipSpace(b, i+1)
		default:
			return dst, errMalformed
		}
	}
	return dst, errIncomplete
}

// valueEnd returns the index past the JSON value that starts at b[i]. It finds where the value ends,
// honouring strings and their escapes; it does not check what lies between (eachMember does, where
// the trimming looks).
func valueEnd(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errIncomplete
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		return nestedEnd(b, i)
	case '}', ']', ',', ':':
		return 0, errMalformed
	}
	for j := i; j < len(b); j++ { // a number, true, false or null
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j, nil
		case '"', '{', '[', ':':
			return 0, errMalformed
		}
	}
	return 0, errIncomplete
}

// nestedEnd returns the index past the object or array that starts at b[i].
func nestedEnd(b []byte, i int) (int, error) {
	depth := 0
	for j := i; j < len(b); j++ {
		switch b[j] {
		case '"':
			end, err := stringEnd(b, j)
			if err != nil {
				return 0, err
			}
			j = end - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, nil
			}
			if depth < 0 {
				return 0, errMalformed
			}
		}
	}
	return 0, errIncomplete
}

// stringEnd returns the index past the string whose opening quote is b[i]: the next quote not
// escaped by an odd number of backslashes.
func stringEnd(b []byte, i int) (int, error) {
	for j := i + 1; ; {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			return 0, errIncomplete
		}
		j += q
		backslashes := 0
		for k := j - 1; k > i && b[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}
