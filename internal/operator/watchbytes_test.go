package operator

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The counter counts the bytes of watch responses by the resource watched, and nothing of lists or
// writes.
func TestWatchBytesCountsWatchesByResource(t *testing.T) {
	reg := prometheus.NewRegistry()
	w, err := newWatchBytes(reg)
	if err != nil {
		t.Fatal(err)
	}
	body := `{"type":"ADDED","object":{}}`
	rt := w.wrap(roundTripper(func(*http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(body))}, nil
	}))
	for _, tc := range []struct{ method, url string }{
		{http.MethodGet, "https://api/api/v1/pods?watch=true"},
		{http.MethodGet, "https://api/prefix/apis/sharestate.dev/v1alpha1/namespaces/ns/sharegroups?watch=1&resourceVersion=5"},
		{http.MethodGet, "https://api/apis/sharestate.dev/v1alpha1/namespaces/ns/sharepartitionstates?limit=500"},
		{http.MethodPatch, "https://api/apis/sharestate.dev/v1alpha1/namespaces/ns/sharepartitionstates/p?watch=true"},
	} {
		req, err := http.NewRequest(tc.method, tc.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(resp.Body); string(got) != body {
			t.Fatalf("%s %s: body %q, want %q", tc.method, tc.url, got, body)
		}
	}
	n := float64(len(body))
	for resource, want := range map[string]float64{"pods": n, "sharegroups": n, "sharepartitionstates": 0} {
		if got := testutil.ToFloat64(w.total.WithLabelValues(resource)); got != want {
			t.Errorf("%s: %.0f watch bytes counted, want %.0f", resource, got, want)
		}
	}
}
