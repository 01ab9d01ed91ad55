package operator

import (
	"io"
	"net/http"
	"path"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sharestate/sharestate-operator/internal/metricsreg"
)

// The operator watches no SharePartitionState: the persisters' writes must not reach it
// (docs/architecture.md, "What the operator watches"). watchBytes counts the bytes of every watch
// stream the operator reads, by resource, so that anyone can see that they do not: the
// sharepartitionstates series stays at zero, and the others (pods, sharegroups) grow with pod and
// group changes, not with writes.

// watchBytes wraps the operator's transport and counts the bytes of watch responses, by resource.
type watchBytes struct {
	total *prometheus.CounterVec
}

// newWatchBytes registers the counter on reg (nil: none).
func newWatchBytes(reg prometheus.Registerer) (*watchBytes, error) {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sharestate_operator_watch_bytes_total",
		Help: "Bytes of watch events the operator received from the API server, by resource (sharepartitionstates stays at zero: the operator does not watch them).",
	}, []string{"resource"})
	var err error
	metricsreg.Into(reg, &err, &total)
	total.WithLabelValues("sharepartitionstates") // shown at zero: the series says it is not watched
	return &watchBytes{total: total}, err
}

// wrap is a rest.Config WrapTransport.
func (w *watchBytes) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || !isWatch(req) || resp.Body == nil {
			return resp, err
		}
		resp.Body = &countingBody{ReadCloser: resp.Body, count: w.total.WithLabelValues(watchedResource(req))}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// isWatch reports whether req is a watch: a GET with watch set.
func isWatch(req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// watchedResource is the resource a watch's path names: its last element (a collection, in a
// namespace or cluster-wide; the API's path may follow a prefix of the server's URL).
func watchedResource(req *http.Request) string {
	return path.Base(strings.TrimSuffix(req.URL.Path, "/"))
}

// countingBody counts the bytes read through it.
type countingBody struct {
	io.ReadCloser
	count prometheus.Counter
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.count.Add(float64(n))
	}
	return n, err
}
