package operator_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// env is the control plane the tests share (nil with -short), with the operator's manager running on
// it, serving its metrics securely (its default) on metricsAddr.
var (
	env         *testenv.Env
	metricsAddr string
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
	scraper, stranger := serviceAccountToken(t, ns, "scraper"), serviceAccountToken(t, ns, "stranger")
	allowMetrics(t, ns, "scraper")
	url := "https://" + metricsAddr + "/metrics"
	testenv.Eventually(t, 30*time.Second, func() error { _, _, err := scrape(url, ""); return err })

	for _, tc := range []struct {
		name, token string
		want        int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"a garbage token", "garbage", http.StatusUnauthorized},
		{"a JWT-shaped token no one issued", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln", http.StatusUnauthorized},
		{"a service account without access", stranger, http.StatusForbidden},
	} {
		status, body, err := scrape(url, tc.token)
		if err != nil || status != tc.want {
			t.Fatalf("%s: status %d (%q, %v), want %d", tc.name, status, body, err, tc.want)
		}
		if strings.Contains(body, env.Config.Host) {
			t.Fatalf("%s: the answer names the API server: %q", tc.name, body)
		}
	}
	// The binding takes effect once the API server's RBAC cache has it.
	testenv.Eventually(t, 30*time.Second, func() error {
		status, body, err := scrape(url, scraper)
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

// scrape GETs url with token as a bearer token ("" for none) and returns the status and body.
func scrape(url, token string) (int, string, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		// The operator's certificate is self-signed.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test of authentication, not of the certificate
	}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// serviceAccountToken creates service account name in ns and returns a token of it.
func serviceAccountToken(t *testing.T, ns, name string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return token.Status.Token
}

// allowMetrics lets service account name of ns get /metrics, as the chart's metrics-reader role does.
func allowMetrics(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), obj) })
	}
}
