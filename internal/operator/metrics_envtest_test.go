package operator_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// compressedWatches counts the operator's watch responses that arrived gzip-compressed.
var compressedWatches gzipCounter

// gzipCounter wraps a transport and counts the watch responses it saw decompressed (net/http
// decompresses a response it asked gzip for, and says so in Uncompressed).
type gzipCounter struct {
	watches, compressed atomic.Int64
}

func (g *gzipCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && req.URL.Query().Get("watch") == "true" {
			g.watches.Add(1)
			if resp.Uncompressed {
				g.compressed.Add(1)
			}
		}
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// env is the control plane the tests share (nil with -short), with the operator's manager running on
// it, serving its metrics securely (its default) on metricsAddr; operatorCache is its manager's cache.
var (
	env           *testenv.Env
	metricsAddr   string
	operatorCache cache.Cache
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env = e
		if e == nil {
			return nil
		}
		return startOperator(e)
	}))
}

// startOperator runs the operator's manager (once per process: controller names are global); the
// returned function stops it and waits.
func startOperator(e *testenv.Env) func() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	metricsAddr = ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := rest.CopyConfig(e.Config)
	cfg.WrapTransport = compressedWatches.wrap
	// A resync and a group refresh a second: the group totals come from the operator's last look at
	// every partition, at the group's refresh.
	mgr, err := operator.NewManager(ctx, cfg, operator.Options{MetricsBindAddress: metricsAddr, SecureMetrics: true, HealthProbeBindAddress: "0",
		PartitionResync: time.Second, TotalsRefresh: time.Second})
	if err != nil {
		panic(err)
	}
	operatorCache = mgr.GetCache()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			fmt.Fprintln(os.Stderr, "the manager stopped with", err)
		}
	}
}

// The operator's metrics, served securely (its default): the API server reviews every scrape's
// token and access. A token it refuses is answered 401 (controller-runtime's own filter answered
// 500), a service account without access 403, one bound to a role that may get /metrics 200.
func TestSecureMetricsAnswerAsTheAPIServerDoes(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	scraper, stranger := env.ServiceAccountToken(t, ns, "scraper"), env.ServiceAccountToken(t, ns, "stranger")
	env.AllowMetrics(t, ns, "scraper")
	url := "https://" + metricsAddr + "/metrics"
	testenv.Eventually(t, 30*time.Second, func() error { _, _, err := testenv.Scrape(url, ""); return err })

	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a garbage token", "garbage", http.StatusUnauthorized},
		{"a JWT-shaped token no one issued", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", http.StatusUnauthorized},
		{"a service account without access", stranger, http.StatusForbidden},
	} {
		status, body, err := testenv.Scrape(url, tc.token)
		if err != nil || status != tc.want {
			t.Fatalf("%s: status %d (%q, %v), want %d", tc.name, status, body, err, tc.want)
		}
		if strings.Contains(body, env.Config.Host) {
			t.Fatalf("%s: the answer names the API server: %q", tc.name, body)
		}
	}
	// The binding takes effect once the API server's RBAC cache has it.
	testenv.Eventually(t, 30*time.Second, func() error {
		status, body, err := testenv.Scrape(url, scraper)
		switch {
		case err != nil:
			return err
		case status != http.StatusOK:
			return fmt.Errorf("status %d (%q)", status, body)
		case !strings.Contains(body, "controller_runtime_reconcile_total"):
			return fmt.Errorf("no controller-runtime metrics in %d bytes", len(body))
		case !strings.Contains(body, `rest_client_request_duration_seconds_count{host=`):
			return fmt.Errorf("no API request latencies in %d bytes", len(body))
		}
		return nil
	})
}

// TestWatchesAreNotCompressed: the operator asks for no compression (its default), so the API
// server, which from Kubernetes 1.37 gzips a streaming list's whole watch, sends its watches plain:
// neither side spends CPU on every partition write for it. A group created here and seen in the
// operator's cache was delivered by a watch that is counted by then.
func TestWatchesAreNotCompressed(t *testing.T) {
	testenv.Require(t, env)
	ctx := t.Context()
	ns := env.Namespace(t)
	sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName("watched")},
		Spec: sharestatev1.ShareGroupSpec{GroupID: "watched"}}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	err := testenv.Poll(30*time.Second, func() error {
		return operatorCache.Get(ctx, client.ObjectKeyFromObject(sg), &sharestatev1.ShareGroup{})
	})
	if err != nil {
		t.Fatalf("the operator's cache never saw the group: %v", err)
	}
	if n, of := compressedWatches.compressed.Load(), compressedWatches.watches.Load(); n > 0 || of == 0 {
		t.Fatalf("%d of the operator's %d watches arrived gzip-compressed, want none of at least one", n, of)
	}
}
