package main_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runToExit runs the sidecar binary with args and no downward-API variables, and returns its exit
// status (-1 if it did not exit with one) and its output.
func runToExit(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, sidecarBinary(t), args...)
	cmd.Env = append(os.Environ(), "POD_NAMESPACE=", "POD_NAME=", "POD_UID=", "KUBECONFIG=", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, string(out)
	case errors.As(err, &exit):
		return exit.ExitCode(), string(out)
	default:
		t.Fatalf("running the sidecar: %v\n%s", err, out)
		return -1, ""
	}
}

// wantOutput checks the exit status, that the output has the given number of lines and no stack
// trace, and that it says each wanted phrase.
func wantOutput(t *testing.T, code int, out string, wantCode, lines int, want ...string) {
	t.Helper()
	if code != wantCode {
		t.Errorf("exit status %d, want %d", code, wantCode)
	}
	if n := len(strings.Split(strings.TrimSpace(out), "\n")); n != lines || strings.Contains(out, "stacktrace") || strings.Contains(out, "goroutine ") {
		t.Errorf("%d lines (want %d), or a stack trace:\n%s", n, lines, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the output does not say %q:\n%s", w, out)
		}
	}
}

// The binary refuses invalid flags before it does anything else: exit status 2, one line per problem.
func TestInvalidFlagsFailAtStart(t *testing.T) {
	code, out := runToExit(t, "--namespace=kafka", "--broker-id=1", "--pod-name=kafka-1",
		"--max-pending-writes=0", "--request-timeout=-5s")
	wantOutput(t, code, out, 2, 3, "invalid flags", "--max-pending-writes=0", "--request-timeout=-5s")
}

// With no flags every missing one is named, not only the first.
func TestNoFlagsNamesEveryMissingFlag(t *testing.T) {
	code, out := runToExit(t)
	wantOutput(t, code, out, 2, 4, "--broker-id is required", "--namespace is required", "--pod-name is required")
}

// A broker id given is never called "required": -1 is out of range, and said so.
func TestNegativeBrokerID(t *testing.T) {
	code, out := runToExit(t, "--namespace=kafka", "--pod-name=kafka-1", "--broker-id=-1")
	wantOutput(t, code, out, 2, 2, "--broker-id=-1: must be the broker's node.id, 0 or more")
}

// Malformed and clashing listen addresses are refused with the other flags, before any listener
// binds: exit status 2, each named.
func TestBadListenAddressesFailAtStart(t *testing.T) {
	code, out := runToExit(t, "--namespace=kafka", "--broker-id=1", "--pod-name=kafka-1",
		"--listen-address=bad", "--health-probe-bind-address=:9088", "--metrics-bind-address=:9088")
	wantOutput(t, code, out, 2, 3, `--listen-address="bad": want [host]:port`,
		"--health-probe-bind-address=:9088 and --metrics-bind-address=:9088 take the same port")
}

// A port already in use when the sidecar binds it ends the sidecar with one line naming the flag and
// the address: exit status 1, no stack trace.
func TestPortInUseIsOneLine(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	addr := taken.Addr().String()
	// Info logs off: whether the pod's labelling, which fails against no API server, logs before the
	// bind fails is a race.
	code, out := runToExit(t, "--kubeconfig="+unreachableKubeconfig(t), "--namespace=kafka", "--broker-id=1", "--pod-name=kafka-1",
		"--listen-address="+addr, "--health-probe-bind-address="+freeAddr(t), "--metrics-bind-address=0", "--zap-log-level=error")
	wantOutput(t, code, out, 1, 1, "sharestate-sidecar: --listen-address="+addr+": ", "address already in use")
}

// The sidecar logs durations with their unit: "drainTimeout":"30s", not 30.
func TestDurationsAreLoggedWithTheirUnit(t *testing.T) {
	s := startSidecar(t, "kafka", sidecarOptions{kubeconfig: unreachableKubeconfig(t)})
	s.stop(t)
	if logs := s.logs.String(); !strings.Contains(logs, `"drainTimeout":"30s"`) {
		t.Fatalf("the shutdown's log does not say drainTimeout 30s:\n%s", logs)
	}
}

// unreachableKubeconfig writes a kubeconfig whose API server nothing serves: enough for the sidecar
// to start, since neither its listeners nor its readiness wait for the API server.
func unreachableKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n" +
		"contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\ncurrent-context: c\n"
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
