package operator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func trimmed(t testing.TB, ev string) string {
	t.Helper()
	return string(appendTrimmed(nil, []byte(ev)))
}

func TestTrimmedEvents(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"both cut",
			`{"type":"MODIFIED","object":{"apiVersion":"v","kind":"SharePartitionState","metadata":{"name":"p","managedFields":[{"manager":"m","fieldsV1":{"f:status":{}}}],"resourceVersion":"7"},"spec":{"partition":1},"status":{"inFlightRecords":5,"stateBatches":["10-14/0/1","15/2/1"],"stateEpoch":2}}}`,
			`{"type":"MODIFIED","object":{"apiVersion":"v","kind":"SharePartitionState","metadata":{"name":"p","resourceVersion":"7"},"spec":{"partition":1},"status":{"inFlightRecords":5,"stateEpoch":2}}}`},
		{"batches kept without the count",
			`{"type":"ADDED","object":{"metadata":{"managedFields":[]},"status":{"stateBatches":["1/0/1"],"stateEpoch":2}}}`,
			`{"type":"ADDED","object":{"metadata":{},"status":{"stateBatches":["1/0/1"],"stateEpoch":2}}}`},
		{"batches kept with a null count",
			`{"type":"ADDED","object":{"status":{"inFlightRecords":null,"stateBatches":["1/0/1"]}}}`,
			`{"type":"ADDED","object":{"status":{"inFlightRecords":null,"stateBatches":["1/0/1"]}}}`},
		{"last member, count after the batches",
			`{"object":{"status":{"stateEpoch":1,"stateBatches":["1/0/1"],"inFlightRecords":1},"metadata":{"name":"a","managedFields":[{}]}},"type":"ADDED"}`,
			`{"object":{"status":{"stateEpoch":1,"inFlightRecords":1},"metadata":{"name":"a"}},"type":"ADDED"}`},
		{"only member, with white space",
			"{ \"type\" : \"ADDED\" ,\n \"object\" : { \"metadata\" : { \"managedFields\" : [ { } ] } , \"status\" : { \"stateBatches\" : [ ] , \"inFlightRecords\" : 0 } } }",
			"{ \"type\" : \"ADDED\" ,\n \"object\" : { \"metadata\" : {  } , \"status\" : { \"inFlightRecords\" : 0 } } }"},
		{"decoys: the names in strings, deeper, and in the spec",
			`{"type":"ADDED","object":{"metadata":{"annotations":{"managedFields":"x","q":"\"managedFields\":{"},"name":"} ]\\"},"spec":{"managedFields":[1],"stateBatches":[2]},"status":{"leader":{"stateBatches":[3],"inFlightRecords":1}}}}`,
			`{"type":"ADDED","object":{"metadata":{"annotations":{"managedFields":"x","q":"\"managedFields\":{"},"name":"} ]\\"},"spec":{"managedFields":[1],"stateBatches":[2]},"status":{"leader":{"stateBatches":[3],"inFlightRecords":1}}}}`},
		{"a bookmark",
			`{"type":"BOOKMARK","object":{"kind":"SharePartitionState","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`,
			`{"type":"BOOKMARK","object":{"kind":"SharePartitionState","metadata":{"resourceVersion":"12","annotations":{"k8s.io/initial-events-end":"true"}}}}`},
		{"an error event", `{"type":"ERROR","object":{"kind":"Status","code":410}}`, `{"type":"ERROR","object":{"kind":"Status","code":410}}`},
		{"an escaped key is left as it is",
			`{"object":{"metadata":{"man\u0061gedFields":[]}}}`, `{"object":{"metadata":{"man\u0061gedFields":[]}}}`},
		{"object not an object", `{"type":"ADDED","object":[{"metadata":{"managedFields":[]}}]}`, `{"type":"ADDED","object":[{"metadata":{"managedFields":[]}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := trimmed(t, tc.in); got != tc.want {
				t.Fatalf("trimmed\n%s\nto\n%s\nwant\n%s", tc.in, got, tc.want)
			}
		})
	}
}

// Random events, their members in random order with random white space and strings that look like
// JSON, trim to what removing the two fields from the decoded event gives.
func TestTrimmedEventsMatchTheDecodedModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		ev := randomEvent(rng)
		in := render(rng, ev)
		got := trimmed(t, in)
		var decoded any
		if err := json.Unmarshal([]byte(got), &decoded); err != nil {
			t.Fatalf("case %d: trimmed\n%s\nto invalid JSON\n%s: %v", i, in, got, err)
		}
		want := withoutTrimmedFields(ev)
		if !reflect.DeepEqual(normalize(decoded), normalize(want)) {
			t.Fatalf("case %d: trimmed\n%s\nto\n%s\nwant the value of\n%s", i, in, got, render(rng, want))
		}
	}
}

// The reader gives out every event trimmed, however the stream is cut into reads, and passes what
// follows an unreadable event as it is.
func TestTrimReaderAcrossReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var stream, want bytes.Buffer
	for range 200 {
		ev := render(rng, randomEvent(rng))
		stream.WriteString(ev + "\n")
		want.WriteString(trimmed(t, ev) + "\n")
	}
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one byte": iotest.OneByteReader,
		"random":   func(r io.Reader) io.Reader { return &choppyReader{r: r, rng: rng} },
	} {
		t.Run(name, func(t *testing.T) {
			trimmer, _ := newWatchTrimmer(nil)
			got, err := io.ReadAll(&trimReader{src: io.NopCloser(wrap(bytes.NewReader(stream.Bytes()))), counts: trimmer})
			if err != nil || string(got) != want.String() {
				t.Fatalf("read %d bytes (%v), want %d", len(got), err, want.Len())
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		first := `{"type":"ADDED","object":{"metadata":{"managedFields":[]}}}`
		rest := `{"type":"ADDED","object":]}` + "\n" + first + "\n" + `{"type":"ADDED","obj`
		trimmer, _ := newWatchTrimmer(nil)
		got, err := io.ReadAll(&trimReader{src: io.NopCloser(strings.NewReader(first + "\n" + rest)), counts: trimmer})
		if want := trimmed(t, first) + "\n" + rest; err != nil || string(got) != want {
			t.Fatalf("read\n%s (%v)\nwant\n%s", got, err, want)
		}
	})
	t.Run("cut short", func(t *testing.T) {
		in := `{"type":"ADDED","object":{"metadata":{"managedFields":[]}}}` + "\n" + `{"type":"ADDED","obj`
		trimmer, _ := newWatchTrimmer(nil)
		got, err := io.ReadAll(&trimReader{src: io.NopCloser(iotest.DataErrReader(strings.NewReader(in))), counts: trimmer})
		if want := `{"type":"ADDED","object":{"metadata":{}}}` + "\n" + `{"type":"ADDED","obj`; err != nil || string(got) != want {
			t.Fatalf("read\n%s (%v)\nwant\n%s", got, err, want)
		}
	})
}

// Only the JSON watches of SharePartitionStates are trimmed, and the metric counts what was kept and
// what was cut.
func TestWatchTrimmerPicksPartitionWatches(t *testing.T) {
	event := `{"type":"ADDED","object":{"metadata":{"name":"p","managedFields":[{"manager":"m"}]}}}` + "\n"
	reg := prometheus.NewPedanticRegistry()
	trimmer, err := newWatchTrimmer(reg)
	if err != nil {
		t.Fatal(err)
	}
	rt := trimmer.wrap(roundTripper(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(event)), Request: req}, nil
	}))
	for _, tc := range []struct {
		method, url string
		trim        bool
	}{
		{http.MethodGet, "https://api/apis/sharestate.dev/v1alpha1/sharepartitionstates?watch=true", true},
		{http.MethodGet, "https://api/apis/sharestate.dev/v1alpha1/namespaces/ns/sharepartitionstates?allowWatchBookmarks=true&watch=1", true},
		{http.MethodGet, "https://api/apis/sharestate.dev/v1alpha1/namespaces/ns/sharepartitionstates", false},
		{http.MethodGet, "https://api/apis/sharestate.dev/v1alpha1/namespaces/ns/sharepartitionstates/p?watch=true", false},
		{http.MethodGet, "https://api/apis/sharestate.dev/v1alpha1/namespaces/ns/sharegroups?watch=true", false},
		{http.MethodGet, "https://api/api/v1/namespaces/ns/pods?watch=true", false},
		{http.MethodGet, "https://proxy/k8s/clusters/c-1/apis/sharestate.dev/v1alpha1/sharepartitionstates?watch=true", true},
		{http.MethodPost, "https://api/apis/sharestate.dev/v1alpha1/sharepartitionstates?watch=true", false},
	} {
		u, _ := url.Parse(tc.url)
		resp, err := rt.RoundTrip(&http.Request{Method: tc.method, URL: u})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if got := string(body) != event; got != tc.trim {
			t.Errorf("%s %s: trimmed %v, want %v: %s", tc.method, tc.url, got, tc.trim, body)
		}
	}
	want := fmt.Sprintf(`
# HELP sharestate_operator_partition_watch_bytes_total Bytes of SharePartitionState watch events received, by part: kept for decoding, or trimmed before it (managedFields, and state batches the persister's in-flight count stands for).
# TYPE sharestate_operator_partition_watch_bytes_total counter
sharestate_operator_partition_watch_bytes_total{part="kept"} %d
sharestate_operator_partition_watch_bytes_total{part="trimmed"} %d
`, 3*(len(event)-len(`,"managedFields":[{"manager":"m"}]`)), 3*len(`,"managedFields":[{"manager":"m"}]`))
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sharestate_operator_partition_watch_bytes_total"); err != nil {
		t.Fatal(err)
	}
}

// FuzzTrimmedEvent: any input trims without a panic; a valid event (no duplicate or escaped keys)
// trims to valid JSON with the value of the event without the two fields.
func FuzzTrimmedEvent(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		f.Add(render(rng, randomEvent(rng)))
	}
	f.Add(`{"object":{"metadata":{"managedFields":[]},"status":{"inFlightRecords":1,"stateBatches":[]}}}`)
	f.Fuzz(func(t *testing.T, in string) {
		got := trimmed(t, in)
		var ev any
		if !isPlainEvent(in) || json.Unmarshal([]byte(in), &ev) != nil {
			return
		}
		var decoded any
		if err := json.Unmarshal([]byte(got), &decoded); err != nil {
			t.Fatalf("trimmed\n%s\nto invalid JSON\n%s: %v", in, got, err)
		}
		if !reflect.DeepEqual(normalize(decoded), normalize(withoutTrimmedFields(ev))) {
			t.Fatalf("trimmed\n%s\nto\n%s", in, got)
		}
	})
}

// isPlainEvent reports whether in is one JSON object whose keys are distinct within each object and
// spelled without \u escapes: where the decoded model and the bytes can be compared.
func isPlainEvent(in string) bool {
	if strings.Contains(in, `\u`) || !strings.HasPrefix(strings.TrimLeft(in, " \t\r\n"), "{") {
		return false
	}
	dec := json.NewDecoder(strings.NewReader(in))
	if !distinctKeys(dec) {
		return false
	}
	_, err := dec.Token()
	return err == io.EOF
}

// distinctKeys reads one value from dec and reports whether it is valid with no key twice in an object.
func distinctKeys(dec *json.Decoder) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return true
	}
	seen := map[string]bool{}
	for dec.More() {
		if d == '{' {
			tok, err := dec.Token()
			key, ok := tok.(string)
			if err != nil || !ok || seen[key] {
				return false
			}
			seen[key] = true
		}
		if !distinctKeys(dec) {
			return false
		}
	}
	_, err = dec.Token()
	return err == nil
}

// withoutTrimmedFields is the model: ev without object.metadata.managedFields, and without
// object.status.stateBatches where object.status has a non-null inFlightRecords.
func withoutTrimmedFields(ev any) any {
	out := deepCopy(ev)
	top, _ := out.(map[string]any)
	object, _ := top["object"].(map[string]any)
	if metadata, ok := object["metadata"].(map[string]any); ok {
		delete(metadata, "managedFields")
	}
	if status, ok := object["status"].(map[string]any); ok && status["inFlightRecords"] != nil {
		delete(status, "stateBatches")
	}
	return out
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

func normalize(v any) any { return deepCopy(v) }

// randomEvent builds a watch event of the shapes the API server sends, with decoys: the trimmed
// names elsewhere, strings holding JSON punctuation and escapes.
func randomEvent(rng *rand.Rand) map[string]any {
	metadata := map[string]any{"name": randomString(rng), "resourceVersion": "12"}
	if rng.IntN(4) > 0 {
		metadata["managedFields"] = []any{map[string]any{"manager": randomString(rng), "fieldsV1": map[string]any{"f:status": map[string]any{"f:stateBatches": map[string]any{}}}}}
	}
	if rng.IntN(2) == 0 {
		metadata["annotations"] = map[string]any{"managedFields": randomString(rng), "stateBatches": "[\"x\"]"}
	}
	status := map[string]any{"stateEpoch": float64(rng.IntN(5))}
	if rng.IntN(4) > 0 {
		status["stateBatches"] = []any{"10-14/0/1", randomString(rng)}
	}
	switch rng.IntN(3) {
	case 0:
		status["inFlightRecords"] = float64(rng.IntN(100))
	case 1:
		status["inFlightRecords"] = nil
	}
	status["leader"] = map[string]any{"stateBatches": []any{"decoy"}, "inFlightRecords": 1.0, "podName": randomString(rng)}
	object := map[string]any{"apiVersion": "sharestate.dev/v1alpha1", "kind": "SharePartitionState", "metadata": metadata,
		"spec": map[string]any{"managedFields": "decoy", "partition": 3.0}}
	if rng.IntN(5) > 0 {
		object["status"] = status
	}
	return map[string]any{"type": "MODIFIED", "object": object}
}

func randomString(rng *rand.Rand) string {
	pieces := []string{"a", `"`, `\`, "{", "}", "[", "]", ",", ":", " ", "é", "\n", "managedFields", `\"`}
	var b strings.Builder
	for range rng.IntN(8) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

// render writes v as JSON with its objects' members in random order and random white space.
func render(rng *rand.Rand, v any) string {
	var b strings.Builder
	renderInto(&b, rng, v)
	return b.String()
}

func renderInto(b *strings.Builder, rng *rand.Rand, v any) {
	space := func() {
		if rng.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t", "  "}[rng.IntN(4)])
		}
	}
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			kb, _ := json.Marshal(k)
			b.Write(kb)
			space()
			b.WriteByte(':')
			space()
			renderInto(b, rng, v[k])
			space()
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			renderInto(b, rng, e)
		}
		b.WriteByte(']')
	default:
		eb, _ := json.Marshal(v)
		b.Write(eb)
	}
}

// choppyReader returns what r holds in reads of random sizes.
type choppyReader struct {
	r   io.Reader
	rng *rand.Rand
}

func (c *choppyReader) Read(p []byte) (int, error) {
	return c.r.Read(p[:min(len(p), 1+c.rng.IntN(300))])
}
