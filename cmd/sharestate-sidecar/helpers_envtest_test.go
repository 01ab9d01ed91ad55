package main_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// sidecar is a running sharestate-sidecar process.
type sidecar struct {
	addr, health, metrics string
	cmd                   *exec.Cmd
	logs                  *testenv.SyncBuffer
	exited                chan struct{} // closed when the process has exited, with exitErr set
	exitErr               error
}

// sidecarOptions shape a sidecar for a test.
type sidecarOptions struct {
	kubeconfig string   // default: a service account bound to the sidecar's ClusterRole
	brokerID   int      // default 1
	args       []string // more flags
}

// startSidecar runs the sidecar binary for namespace ns, waits until it is ready, and stops it with
// SIGTERM when the test ends (failing the test if it does not exit cleanly). Its logs are printed if
// the test fails.
func startSidecar(t testing.TB, ns string, opts sidecarOptions) *sidecar {
	t.Helper()
	if opts.kubeconfig == "" {
		opts.kubeconfig = sidecarKubeconfig(t, ns)
	}
	if opts.brokerID == 0 {
		opts.brokerID = 1
	}
	// The addresses are free when picked, not when the sidecar binds them: another test's process
	// may take one in between, on a busy machine now and then. The sidecar then exits at once, and a
	// start on new addresses is all that failed.
	for attempt := 1; ; attempt++ {
		s, err := launchSidecar(t, ns, opts)
		if err == nil {
			t.Cleanup(func() { s.stop(t) })
			return s
		}
		if attempt == startAttempts || !strings.Contains(s.logs.String(), "address already in use") {
			t.Fatal(err)
		}
		t.Logf("the sidecar lost an address it was given (%v); starting it again on others", err)
	}
}

// startAttempts is how many times startSidecar starts a sidecar whose address was taken meanwhile.
const startAttempts = 3

// launchSidecar starts the sidecar on addresses free a moment before, and waits until it is ready:
// its Kafka listener serves, whether or not the API server answers. On an error the process has
// exited, or was killed.
func launchSidecar(t testing.TB, ns string, opts sidecarOptions) (*sidecar, error) {
	t.Helper()
	s := &sidecar{addr: freeAddr(t), health: freeAddr(t), metrics: freeAddr(t), logs: &testenv.SyncBuffer{}, exited: make(chan struct{})}
	args := append([]string{
		"--listen-address=" + s.addr, "--health-probe-bind-address=" + s.health, "--metrics-bind-address=" + s.metrics, "--metrics-secure=false",
		"--kubeconfig=" + opts.kubeconfig, "--namespace=" + ns, fmt.Sprintf("--broker-id=%d", opts.brokerID),
	}, opts.args...)
	s.cmd = exec.Command(sidecarBinary(t), args...)
	s.cmd.Env = append(os.Environ(), fmt.Sprintf("POD_NAME=broker-%d", opts.brokerID), fmt.Sprintf("POD_UID=uid-%d", opts.brokerID))
	s.cmd.Stdout, s.cmd.Stderr = s.logs, s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exitErr = s.cmd.Wait(); close(s.exited) }()
	err := s.await("readiness", func() bool { return s.probe("/readyz") == http.StatusOK })
	if err != nil {
		_ = s.cmd.Process.Kill() // when it has not exited already
		<-s.exited
	}
	return s, err
}

// await waits up to 30 s for cond; its error says why it did not come (the sidecar exited, or
// the time ran out).
func (s *sidecar) await(what string, cond func() bool) error {
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case <-s.exited:
			return fmt.Errorf("the sidecar exited (%w) before %s:\n%s", s.exitErr, what, s.logs)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for the sidecar's %s:\n%s", what, s.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (s *sidecar) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if err := s.await(what, cond); err != nil {
		t.Fatal(err)
	}
}

// stop sends SIGTERM, unless the process has exited already, and expects a clean exit. If the test
// failed it sends SIGQUIT instead, so that the logs end with a dump of every goroutine: where a request
// was stuck.
func (s *sidecar) stop(t testing.TB) {
	quit := false
	select {
	case <-s.exited:
	default:
		quit = t.Failed()
		if quit {
			_ = s.cmd.Process.Signal(syscall.SIGQUIT)
		} else {
			_ = s.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	select {
	case <-s.exited:
		if s.exitErr != nil && !quit {
			t.Errorf("the sidecar exited with %v:\n%s", s.exitErr, s.logs)
		}
	case <-time.After(40 * time.Second):
		_ = s.cmd.Process.Kill()
		t.Errorf("the sidecar did not exit within 40s of SIGTERM:\n%s", s.logs)
	}
	if t.Failed() {
		t.Logf("sidecar logs:\n%s", s.logs)
	}
}

// probe returns the status of a health endpoint, 0 if it cannot be reached.
func (s *sidecar) probe(path string) int {
	resp, err := http.Get("http://" + s.health + path)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// scrape returns the sidecar's /metrics.
func (s *sidecar) scrape(t testing.TB) string {
	t.Helper()
	// The metrics server starts after the Kafka listeners the start-up waits for: on a busy machine
	// its port can still refuse a moment after the sidecar is ready.
	var resp *http.Response
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err = http.Get("http://" + s.metrics + "/metrics"); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// metric returns the value of one sample of /metrics, named with its labels as Prometheus prints
// them, or "" if there is none.
func (s *sidecar) metric(t testing.TB, sample string) string {
	t.Helper()
	for _, line := range strings.Split(s.scrape(t), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			return rest
		}
	}
	return ""
}

// eventuallyMetric waits until the sample reads want. A connection's close is counted after its
// socket is closed, so a client that has seen the close may scrape before the count.
func (s *sidecar) eventuallyMetric(t testing.TB, sample, want string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, func() error {
		if got := s.metric(t, sample); got != want {
			return fmt.Errorf("%s = %q, want %s", sample, got, want)
		}
		return nil
	})
}

// freeAddr returns a loopback address whose port was free a moment ago and that no earlier call in
// this process returned: the kernel may hand a just-closed port out again, and two flags of one
// sidecar given the same port make it refuse to start.
func freeAddr(t testing.TB) string {
	t.Helper()
	givenPorts.Lock()
	defer givenPorts.Unlock()
	for {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		if !givenPorts.addrs[addr] {
			givenPorts.addrs[addr] = true
			return addr
		}
	}
}

// givenPorts are the addresses freeAddr has returned.
var givenPorts = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// sidecarKubeconfig writes a kubeconfig for a service account of ns that holds exactly the sidecar's
// RBAC (config/rbac/sidecar/role.yaml, bound in ns), so the tests also prove that role is enough.
func sidecarKubeconfig(t testing.TB, ns string) string {
	t.Helper()
	ctx := context.Background()
	ensureSidecarRole(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sharestate-sidecar"}}
	if err := env.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sharestate-sidecar"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "sharestate-sidecar"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	}
	if err := env.Client.Create(ctx, binding); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	env.AwaitRule(t, testenv.ServiceAccountUser(ns, sa.Name), ns, rbacv1.PolicyRule{
		APIGroups: []string{"sharestate.dev"}, Resources: []string{"sharepartitionstates"}, Verbs: []string{"get"}})
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	token, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a token for the sidecar's service account: %v", err)
	}
	return testenv.WriteKubeconfig(t, env.Config, &clientcmdapi.AuthInfo{Token: token.Status.Token})
}

var roleOnce sync.Once

// ensureSidecarRole creates the sidecar's ClusterRole from the generated manifest.
func ensureSidecarRole(t testing.TB) {
	t.Helper()
	var err error
	roleOnce.Do(func() {
		var raw []byte
		raw, err = os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "sidecar", "role.yaml"))
		if err != nil {
			return
		}
		var role rbacv1.ClusterRole
		if err = yaml.Unmarshal(raw, &role); err != nil {
			return
		}
		if err = env.Client.Create(context.Background(), &role); apierrors.IsAlreadyExists(err) {
			err = nil
		}
	})
	if err != nil {
		t.Fatalf("creating the sidecar's ClusterRole: %v", err)
	}
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// expectClosed checks that the sidecar closes c, skipping whatever it still sends first.
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the sidecar did not close the connection")
		}
		return
	}
}
