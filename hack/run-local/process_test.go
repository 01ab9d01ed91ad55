package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// This file runs run-local as `make run` does, as a process of its own, and looks at it from the
// outside: its output, its exit, and its child processes (etcd and kube-apiserver) in /proc.

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// runLocalBinary builds this command once per test binary.
func runLocalBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs the control-plane binaries (run `make test`)")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("reads the child processes from /proc")
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "run-local-test-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "run-local")
		out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// runLocal is a run-local process.
type runLocal struct {
	cmd  *exec.Cmd
	out  *testenv.SyncBuffer
	done chan error // its exit, once
}

// startRunLocal starts run-local on runDir, without $KUBECONFIG, on ports nothing else uses (a free
// one for the sidecar, none for the rest), with env added to its environment.
func startRunLocal(t *testing.T, runDir string, env ...string) *runLocal {
	t.Helper()
	cmd := exec.Command(runLocalBinary(t), "--run-dir="+runDir,
		"--crd-dir="+filepath.Join(testenv.RepoRoot(), "config", "crd", "bases"),
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--sidecar-health-probe-bind-address=0",
		"--sidecar-listen-address="+freeAddress(t), "--stand-in-interval=500ms")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	r := &runLocal{cmd: cmd, out: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = r.out, r.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if r.exited(0) == nil {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if errors.Is(r.exited(time.Minute), errStillRunning) {
			_ = cmd.Process.Kill()
		}
	})
	return r
}

var errStillRunning = errors.New("still running")

// exited waits up to timeout for the process to end and returns its exit error (nil for status 0),
// or errStillRunning.
func (r *runLocal) exited(timeout time.Duration) error {
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(timeout):
		return errStillRunning
	}
}

// waitFor waits until the output holds text, failing the test if the process ends first.
func (r *runLocal) waitFor(t *testing.T, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(r.out.String(), text) {
		if err := r.exited(0); !errors.Is(err, errStillRunning) {
			t.Fatalf("run-local ended (%v) before printing %q:\n%s", err, text, r.out.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("run-local did not print %q within %s:\n%s", text, timeout, r.out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// children returns run-local's child processes, each with the first word of its command line.
func (r *runLocal) children() map[int]string {
	kids := map[int]string{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 || fields[1] != strconv.Itoa(r.cmd.Process.Pid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		pid, _ := strconv.Atoi(filepath.Base(dir))
		kids[pid] = filepath.Base(string(argv0))
	}
	return kids
}

// stopAndCheck sends sig, and checks that run-local exits with status 0 within timeout and that none
// of the processes it had started before is left.
func (r *runLocal) stopAndCheck(t *testing.T, sig syscall.Signal, timeout time.Duration) {
	t.Helper()
	kids := r.children()
	sent := time.Now()
	if err := r.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	err := r.exited(timeout)
	if err != nil {
		t.Fatalf("after %v run-local: %v within %s, want exit status 0:\n%s", sig, err, timeout, r.out.String())
	}
	t.Logf("run-local stopped %s after %v", time.Since(sent).Round(time.Millisecond), sig)
	for pid, name := range kids {
		if err := syscall.Kill(pid, 0); err == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			t.Errorf("%s (pid %d) was left running", name, pid)
		}
	}
}

// freeAddress returns a loopback address nothing listens at.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
