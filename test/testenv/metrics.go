package testenv

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The helpers of the tests of secured metrics endpoints: the operator's and the sidecar's are
// authenticated and authorized by the API server, as a Prometheus with a service account meets them.

// ServiceAccountToken creates service account name in ns and returns a token of it, valid an hour.
func (e *Env) ServiceAccountToken(t testing.TB, ns, name string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.Config)
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

// BindClusterRole creates role and a ClusterRoleBinding of it to service account name of ns, waits
// until they are in force, and deletes both when the test ends.
func (e *Env) BindClusterRole(t testing.TB, role *rbacv1.ClusterRole, ns, name string) {
	t.Helper()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}},
	}
	for _, obj := range []client.Object{role, binding} {
		if err := e.Client.Create(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Client.Delete(context.Background(), obj) })
	}
	e.AwaitRule(t, ServiceAccountUser(ns, name), "", role.Rules[0])
}

// AllowMetrics lets service account name of ns get /metrics, as the chart's metrics-reader role does.
func (e *Env) AllowMetrics(t testing.TB, ns, name string) {
	t.Helper()
	e.BindClusterRole(t, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name + "-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}, ns, name)
}

// Scrape GETs url with token as a bearer token ("" for none), trusting any certificate (the
// endpoints' are self-signed in the tests), and returns the status and body.
func Scrape(url, token string) (int, string, error) {
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a test of authentication, not of the certificate
	}}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// CounterSum adds up the counters of the family name that g gathers and whose label has value (label
// "": all of them); it fails the test when there is none.
func CounterSum(t testing.TB, g prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total, found := 0.0, false
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" { // every series of the counter
				total, found = total+m.GetCounter().GetValue(), true
			}
			for _, l := range m.GetLabel() {
				if label != "" && l.GetName() == label && l.GetValue() == value {
					total, found = total+m.GetCounter().GetValue(), true
				}
			}
		}
	}
	if !found {
		t.Fatalf("no %s{%s=%q} was gathered", name, label, value)
	}
	return total
}
