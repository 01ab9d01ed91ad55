package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The test binary runs as the operator when this variable is set, so the tests drive the real main.
const runAsOperator = "SHARESTATE_TEST_RUN_OPERATOR"

func TestMain(m *testing.M) {
	if os.Getenv(runAsOperator) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runOperator runs main with args and env, and returns its exit code and stderr.
func runOperator(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), append([]string{runAsOperator + "=1", "KUBERNETES_SERVICE_HOST=", "HOME=" + t.TempDir()}, env...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the operator did not fail: %v\n%s", err, stderr.String())
	}
	return exit.ExitCode(), stderr.String()
}

// wantLines checks the operator's stderr: the wanted phrases, at most lines lines, no stack trace.
func wantLines(t *testing.T, stderr string, lines int, want ...string) {
	t.Helper()
	if n := strings.Count(strings.TrimSpace(stderr), "\n") + 1; n > lines || strings.Contains(stderr, "stacktrace") || strings.Contains(stderr, "KUBERNETES_MASTER") {
		t.Errorf("stderr has %d lines (want at most %d), a stack trace or client-go's hint:\n%s", n, lines, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, stderr)
		}
	}
}

func TestInvalidFlagsFailAtStart(t *testing.T) {
	code, stderr := runOperator(t, nil, "--watch-namespace=kafka,Bad_NS", "--max-concurrent-reconciles=0")
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	wantLines(t, stderr, 3, `--watch-namespace="Bad_NS" is not a valid namespace name`, "--max-concurrent-reconciles=0: must be at least 1")
}

// --leader-elect outside a pod needs the Lease's namespace: it is refused with the other flags,
// naming the flag to add, and accepted once that flag is given.
func TestLeaderElectionOutsideAPodNeedsItsNamespace(t *testing.T) {
	if _, err := os.Stat(inClusterNamespaceFile); err == nil {
		t.Skip("running in a pod, where the Lease's namespace is the pod's")
	}
	code, stderr := runOperator(t, []string{"KUBECONFIG="}, "--leader-elect", "--max-concurrent-reconciles=0")
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	wantLines(t, stderr, 3, "--leader-elect needs --leader-election-namespace outside a pod", "--max-concurrent-reconciles=0")

	code, stderr = runOperator(t, []string{"KUBECONFIG="}, "--leader-elect", "--leader-election-namespace=sharestate-system")
	if code != 1 || !strings.Contains(stderr, "no Kubernetes configuration found") {
		t.Errorf("with --leader-election-namespace: exit code %d, want 1 for the missing kubeconfig, past the flags:\n%s", code, stderr)
	}
}

func TestNoKubeconfigIsOneLine(t *testing.T) {
	code, stderr := runOperator(t, []string{"KUBECONFIG="})
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	wantLines(t, stderr, 1, "no Kubernetes configuration found", "--kubeconfig")
}

func TestUnreachableClusterIsOneLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := "https://" + ln.Addr().String()
	_ = ln.Close()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server + "\"}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: c\n"
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stderr := runOperator(t, []string{"KUBECONFIG=" + path})
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	wantLines(t, stderr, 1, "cannot reach the Kubernetes API server at "+server, "connection refused")
}
