package main_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The sidecar's metrics by default: HTTPS, each scrape's token and access reviewed by the API server
// under the sidecar's own service account, which holds exactly the generated role (its namespaced
// rules by a RoleBinding, its review rules by a ClusterRoleBinding, as the chart binds them). A token
// the API server refuses is answered 401, a service account without access 403, a reader 200.
func TestSecureMetrics(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	kubeconfig := sidecarKubeconfig(t, ns)
	bindClusterScopedSidecarRules(t, ns, "sharestate-sidecar")
	s := startSidecar(t, ns, sidecarOptions{kubeconfig: kubeconfig, args: []string{"--metrics-secure=true"}})
	scraper, stranger := env.ServiceAccountToken(t, ns, "scraper"), env.ServiceAccountToken(t, ns, "stranger")
	env.AllowMetrics(t, ns, "scraper")
	url := "https://" + s.metrics + "/metrics"
	s.waitFor(t, "the metrics listener", func() bool { return dialable(s.metrics) })

	if status, _, err := testenv.Scrape("http://"+s.metrics+"/metrics", scraper); err == nil && status == http.StatusOK {
		t.Fatal("/metrics answered over plain HTTP")
	}
	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a garbage token", "garbage", http.StatusUnauthorized},
		{"a service account without access", stranger, http.StatusForbidden},
	} {
		status, body, err := testenv.Scrape(url, tc.token)
		if err != nil || status != tc.want {
			t.Fatalf("%s: status %d (%q, %v), want %d\n%s", tc.name, status, body, err, tc.want, s.logs)
		}
	}
	testenv.Eventually(t, 30*time.Second, func() error { // once the API server's RBAC cache has the binding
		status, body, err := testenv.Scrape(url, scraper)
		switch {
		case err != nil:
			return err
		case status != http.StatusOK:
			return fmt.Errorf("status %d (%q)", status, body)
		case !strings.Contains(body, "sharestate_sidecar_connections"):
			return fmt.Errorf("no sidecar metrics in %d bytes", len(body))
		}
		return nil
	})
}

// Plain-HTTP metrics are served on loopback only: a loopback address serves them, and the sidecar
// refuses to start with any other.
func TestPlainMetricsOnLoopbackOnly(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	s := startSidecar(t, ns, sidecarOptions{}) // --metrics-secure=false --metrics-bind-address=127.0.0.1:<port>
	if !strings.Contains(s.scrape(t), "sharestate_sidecar_connections") {
		t.Fatal("no sidecar metrics over plain HTTP on loopback")
	}
	_, port, _ := net.SplitHostPort(s.metrics)
	if ip := nonLoopbackIP(); ip != nil {
		if dialable(net.JoinHostPort(ip.String(), port)) {
			t.Fatalf("the plain metrics port answers on %s", ip)
		}
	}
	for _, addr := range []string{":" + port, "0.0.0.0:" + port, "[::]:" + port, "localhost:" + port} {
		out, err := runSidecarToExit(t, ns, "--metrics-secure=false", "--metrics-bind-address="+addr)
		if err == nil || !strings.Contains(out, "not a loopback address") {
			t.Fatalf("with plain metrics on %s the sidecar exited with %v:\n%s", addr, err, out)
		}
	}
}

// The probes answer a fixed "ok" with the API server out of reach, and never name it: its address (an
// internal URL) goes to the sidecar's log only, where the API server's loss is reported.
func TestProbesDoNotNameTheAPIServer(t *testing.T) {
	testenv.Require(t, env)
	cfg := *env.Config
	cfg.Host = "https://127.0.0.1:1" // nothing listens there
	s := startSidecar(t, "unreachable", sidecarOptions{kubeconfig: testenv.AdminKubeconfig(t, &cfg)})
	s.waitFor(t, "the reason in the log", func() bool {
		return strings.Contains(s.logs.String(), "Kubernetes API server became unreachable") && strings.Contains(s.logs.String(), "127.0.0.1:1")
	})
	for _, path := range []string{"/readyz", "/healthz"} {
		resp, err := http.Get("http://" + s.health + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
			t.Fatalf("%s answered %d %q, want 200 \"ok\"", path, resp.StatusCode, body)
		}
	}
}

// runSidecarToExit runs the sidecar for namespace ns with args, expecting it to exit, and returns its
// output and exit error.
func runSidecarToExit(t *testing.T, ns string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sidecarBinary(t), append([]string{
		"--listen-address=" + freeAddr(t), "--health-probe-bind-address=" + freeAddr(t), "--kubeconfig=" + testenv.AdminKubeconfig(t, env.Config),
		"--namespace=" + ns, "--broker-id=1", "--pod-name=broker-1",
	}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// nonLoopbackIP is an address of this machine other than loopback, nil if it has none.
func nonLoopbackIP() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() && n.IP.To4() != nil {
			return n.IP
		}
	}
	return nil
}

// bindClusterScopedSidecarRules grants service account name of ns the generated sidecar role's
// cluster-scoped rules (its token and access reviews) with a ClusterRoleBinding, as the chart does.
func bindClusterScopedSidecarRules(t *testing.T, ns, name string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "sidecar", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var generated rbacv1.ClusterRole
	if err := yaml.Unmarshal(raw, &generated); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-sidecar-reviews"}}
	for _, r := range generated.Rules {
		if slices.Contains(r.APIGroups, authenticationv1.GroupName) || slices.Contains(r.APIGroups, "authorization.k8s.io") {
			role.Rules = append(role.Rules, r)
		}
	}
	if len(role.Rules) != 2 {
		t.Fatalf("config/rbac/sidecar/role.yaml has %d rules for token and access reviews, want 2", len(role.Rules))
	}
	env.BindClusterRole(t, role, ns, name)
}
