package sidecar

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// fakeService is a Kafka-protocol service that serves or not, as the test says.
type fakeService struct{ serving bool }

func (f *fakeService) Serve(net.Listener) error       { return nil }
func (f *fakeService) Shutdown(context.Context) error { return nil }
func (f *fakeService) Serving() bool                  { return f.serving }

// /readyz is the Kafka listeners serving, each of them, and nothing else.
func TestReadyzIsTheKafkaListenersServing(t *testing.T) {
	for _, tc := range []struct {
		name             string
		direct, proxy    bool
		wantCode         int
		wantBody, reason string
	}{
		{name: "both serve", direct: true, proxy: true, wantCode: 200, wantBody: "ok"},
		{name: "the proxy does not serve", direct: true, wantCode: 503, wantBody: "not ready", reason: "proxy on 127.0.0.1:9091 is not serving"},
		{name: "the direct listener does not serve", proxy: true, wantCode: 503, wantBody: "not ready", reason: "server on 127.0.0.1:9089 is not serving"},
		{name: "neither serves (starting, or draining)", wantCode: 503, wantBody: "not ready", reason: "server on 127.0.0.1:9089 is not serving"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			services := []listening{
				{name: "server", address: "127.0.0.1:9089", service: &fakeService{serving: tc.direct}},
				{name: "proxy", address: "127.0.0.1:9091", service: &fakeService{serving: tc.proxy}},
			}
			var logged []string
			log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
			srv := httptest.NewServer(HealthHandler(readiness(services), log))
			defer srv.Close()
			code, body := get(t, srv.URL+"/readyz")
			if code != tc.wantCode || body != tc.wantBody {
				t.Fatalf("/readyz answered %d %q, want %d %q", code, body, tc.wantCode, tc.wantBody)
			}
			if tc.reason != "" && (len(logged) != 1 || !strings.Contains(logged[0], tc.reason)) {
				t.Errorf("logged %q, want one line naming %q", logged, tc.reason)
			}
			if code, _ := get(t, srv.URL+"/healthz"); code != 200 {
				t.Errorf("/healthz answered %d, want 200 whatever the listeners do", code)
			}
		})
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// The API server's reachability is a gauge that follows every check, and a log line at each change
// (the first check's outcome included), not one per check.
func TestAPIServerWatchReportsChanges(t *testing.T) {
	down := errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	var logged []string
	log := funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{})
	w, err := newAPIServerWatch(nil, prometheus.NewRegistry(), log)
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(w.reachable); got != 0 {
		t.Fatalf("before any check the gauge reads %v, want 0", got)
	}
	steps := []struct {
		err      error
		gauge    float64
		newLines []string
	}{
		{err: nil, gauge: 1, newLines: []string{"became reachable"}},
		{err: nil, gauge: 1},
		{err: down, gauge: 0, newLines: []string{"became unreachable", "connection refused"}},
		{err: down, gauge: 0},
		{err: down, gauge: 0},
		{err: nil, gauge: 1, newLines: []string{"became reachable"}},
	}
	for i, s := range steps {
		before := len(logged)
		w.observe(s.err)
		if got := testutil.ToFloat64(w.reachable); got != s.gauge {
			t.Errorf("step %d (%v): the gauge reads %v, want %v", i, s.err, got, s.gauge)
		}
		added := logged[before:]
		if len(s.newLines) == 0 && len(added) != 0 {
			t.Errorf("step %d (%v): logged %q, want nothing (no change)", i, s.err, added)
		}
		if len(s.newLines) != 0 {
			if len(added) != 1 {
				t.Fatalf("step %d (%v): logged %q, want one line", i, s.err, added)
			}
			for _, want := range s.newLines {
				if !strings.Contains(added[0], want) {
					t.Errorf("step %d (%v): logged %q, want it to say %q", i, s.err, added[0], want)
				}
			}
		}
	}
}

// run checks at once, again every interval, gives each check its timeout, and stops with its context.
func TestAPIServerWatchRuns(t *testing.T) {
	var mu sync.Mutex
	var deadlines []time.Duration
	checked := make(chan struct{}, 16)
	check := func(ctx context.Context) error {
		d, ok := ctx.Deadline()
		mu.Lock()
		if ok {
			deadlines = append(deadlines, time.Until(d))
		}
		mu.Unlock()
		select {
		case checked <- struct{}{}:
		default: // the test has seen enough
		}
		return nil
	}
	w, err := newAPIServerWatch(check, prometheus.NewRegistry(), funcr.New(func(string, string) {}, funcr.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.run(ctx, 10*time.Millisecond, time.Minute); close(done) }()
	for range 3 {
		select {
		case <-checked:
		case <-time.After(time.Minute):
			t.Fatal("the watch did not check the API server again")
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the watch did not stop with its context")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(deadlines) < 3 {
		t.Fatalf("%d checks had a deadline, want every one", len(deadlines))
	}
	for _, d := range deadlines {
		if d <= 0 || d > time.Minute {
			t.Errorf("a check had %v left, want at most the timeout of 1m", d)
		}
	}
	if got := testutil.ToFloat64(w.reachable); got != 1 {
		t.Errorf("after successful checks the gauge reads %v, want 1", got)
	}
}
