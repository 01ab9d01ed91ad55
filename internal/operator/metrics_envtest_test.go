package operator_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

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
	mgr, err := operator.NewManager(ctx, e.Config, operator.Options{MetricsBindAddress: metricsAddr, SecureMetrics: true, HealthProbeBindAddress: "0"})
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
		}
		return nil
	})
}
