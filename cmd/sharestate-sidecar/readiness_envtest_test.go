package main_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/faultproxy"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// apiReachable is the sidecar's gauge of whether the Kubernetes API server answers.
const apiReachable = "sharestate_sidecar_api_server_reachable"

// A sidecar whose API server stops answering stays ready (its Kafka listeners serve: in proxy mode its
// broker's replication passes through it), says so in its gauge and its log, answers share-state
// operations COORDINATOR_NOT_AVAILABLE meanwhile, and serves them again once the API server answers.
func TestStaysReadyWhileTheAPIServerIsUnreachable(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	proxy := startAPIServerProxy(t)
	cfg := *env.Config
	cfg.Host = "https://" + proxy.Addr()
	s := startSidecar(t, ns, sidecarOptions{kubeconfig: testenv.AdminKubeconfig(t, &cfg),
		args: []string{"--operation-timeout=1s", "--request-timeout=2s"}})
	k := newKafka(t, s.addr)
	s.eventuallyMetric(t, apiReachable, "1")
	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)

	// Every connection through the proxy is cut after its first byte: the API server is out of reach.
	if err := proxy.SetFaults(faultproxy.Faults{MinBytes: 1, MaxBytes: 1}); err != nil {
		t.Fatal(err)
	}
	proxy.DropAll()
	awaitReadyThroughout(t, s, "the API server's loss in the gauge and the log", func() error {
		if got := s.metric(t, apiReachable); got != "0" {
			return fmt.Errorf("%s = %s", apiReachable, got)
		}
		if !strings.Contains(s.logs.String(), "Kubernetes API server became unreachable") {
			return fmt.Errorf("no log line of the API server's loss")
		}
		return nil
	})
	r := k.read("g", 0, 1)
	expectCode(t, "read with the API server out of reach", r.ErrorCode, r.ErrorMessage, sharestate.ErrCoordinatorNotAvailable)
	if got := s.probe("/readyz"); got != http.StatusOK {
		t.Fatalf("/readyz answered %d after an operation failed for want of the API server, want 200", got)
	}

	if err := proxy.SetFaults(faultproxy.Faults{}); err != nil {
		t.Fatal(err)
	}
	awaitReadyThroughout(t, s, "the API server back in the gauge and the log", func() error {
		if got := s.metric(t, apiReachable); got != "1" {
			return fmt.Errorf("%s = %s", apiReachable, got)
		}
		if n := strings.Count(s.logs.String(), "Kubernetes API server became reachable"); n != 2 {
			return fmt.Errorf("the API server reported reachable %d times, want 2 (at start and now)", n)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, func() error {
		if r := k.read("g", 0, 1); sharestate.ErrorCode(r.ErrorCode) != errNone {
			return fmt.Errorf("read answered %d %v", r.ErrorCode, r.ErrorMessage)
		}
		return nil
	})
}

// awaitReadyThroughout waits up to a minute for cond, failing the test if /readyz answers anything but
// 200 meanwhile.
func awaitReadyThroughout(t *testing.T, s *sidecar, what string, cond func() error) {
	t.Helper()
	err := testenv.Poll(time.Minute, func() error {
		if got := s.probe("/readyz"); got != http.StatusOK {
			t.Fatalf("/readyz answered %d while waiting for %s, want 200 throughout", got, what)
		}
		return cond()
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// startAPIServerProxy starts a fault proxy in front of the API server's port, faultless until the test
// sets faults.
func startAPIServerProxy(t *testing.T) *faultproxy.Proxy {
	t.Helper()
	host := env.Config.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		t.Fatalf("parsing the API server's address %q: %v", env.Config.Host, err)
	}
	proxy, err := faultproxy.New(faultproxy.Options{Target: u.Host})
	if err != nil {
		t.Fatalf("starting the fault proxy: %v", err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	return proxy
}
