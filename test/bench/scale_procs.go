package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// This file runs the scale scenario's binaries (the operator and the sidecar, built from this
// checkout) as processes of their own, so that their CPU time and memory can be read from /proc, and
// finds the API server's process.

// binaries are the built commands.
type binaries struct {
	operator, sidecar string
}

// buildBinaries builds the operator and the sidecar into dir.
func buildBinaries(ctx context.Context, dir string) (binaries, error) {
	b := binaries{operator: filepath.Join(dir, "sharestate-operator"), sidecar: filepath.Join(dir, "sharestate-sidecar")}
	for path, pkg := range map[string]string{b.operator: "./cmd/sharestate-operator", b.sidecar: "./cmd/sharestate-sidecar"} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", path, pkg)
		cmd.Dir = testenv.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
		}
	}
	return b, nil
}

// child is a process the scenario started.
type child struct {
	name    string
	cmd     *exec.Cmd
	log     *os.File
	stamped *testenv.StampedWriter // writes log, each line stamped with the time it arrived
	exited  chan struct{}
	err     error
}

// startChild starts path with args and env added to this process's, its output going to a file of
// dir (each line stamped with the time it arrived), and waits until ready reports true (or the
// process exits, or ctx ends).
func startChild(ctx context.Context, dir, name, path string, args, env []string, ready func() bool) (*child, error) {
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	stamped := testenv.NewStampedWriter(log) // one writer for both: exec copies them in one goroutine
	cmd.Stdout, cmd.Stderr = stamped, stamped
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, log: log, stamped: stamped, exited: make(chan struct{})}
	go func() { c.err = cmd.Wait(); close(c.exited) }()
	for !ready() {
		select {
		case <-c.exited:
			return nil, errors.Join(fmt.Errorf("%s exited before it was ready (its log is %s)", name, log.Name()), c.err)
		case <-ctx.Done():
			c.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

// stop ends the process with SIGTERM, or SIGKILL if it has not exited 30 s later.
func (c *child) stop() {
	select {
	case <-c.exited:
	default:
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(30 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
	_ = c.stamped.Close() // and the log file
}

// healthy reports whether GET http://addr+path answers 200.
func healthy(addr, path string) func() bool {
	client := &http.Client{Timeout: time.Second}
	return func() bool {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
}

// freePort returns a loopback address no one listens on at the moment.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// writeKubeconfig writes a kubeconfig into dir that reaches the API server as cfg does.
func writeKubeconfig(dir string, cfg *rest.Config) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// findAPIServer returns the pid of this process's kube-apiserver child serving cfg's port: envtest
// starts it, and several may run at once (a test's control plane and the scenario's own).
func findAPIServer(cfg *rest.Config) (int, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return 0, fmt.Errorf("the API server's address %q: %w", cfg.Host, err)
	}
	port := u.Port()
	servers, err := childProcesses("kube-apiserver")
	if err != nil {
		return 0, err
	}
	for _, p := range servers {
		cmdline, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.pid), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), "--secure-port="+port+"\x00") {
			return p.pid, nil
		}
	}
	return 0, fmt.Errorf("no kube-apiserver child of this process serves port %s", port)
}

// readRSS returns a process's resident memory in bytes (VmRSS of /proc/<pid>/status).
func readRSS(pid int) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS of %d: %w", pid, err)
		}
		return kb << 10, nil
	}
	return 0, errors.Join(s.Err(), fmt.Errorf("no VmRSS for process %d", pid))
}

// readRunQueueWait returns how long a process's threads have waited, runnable, for a core: the sum
// over /proc/<pid>/task/*/schedstat of its second field, the time spent on a run queue (the kernel's
// Documentation/scheduler/sched-stats.rst). A Go execution trace cannot see this wait: a goroutine
// whose thread the kernel has not yet run looks running, or still blocked, to Go's own scheduler.
// Threads that exit take their waits with them; Go seldom ends a thread, so over a phase of a run
// the difference of two readings is the wait within it.
func readRunQueueWait(pid int) (time.Duration, error) {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, t := range tasks {
		stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", t.Name(), "schedstat"))
		if err != nil {
			continue // the thread ended since the directory was read
		}
		wait, err := parseSchedstatWait(string(stat))
		if err != nil {
			return 0, fmt.Errorf("thread %s of %d: %w", t.Name(), pid, err)
		}
		total += wait
	}
	return total, nil
}

// parseSchedstatWait reads the run-queue wait, in nanoseconds, from the text of a schedstat file:
// "<on the cpu> <waiting on a run queue> <timeslices>".
func parseSchedstatWait(stat string) (time.Duration, error) {
	fields := strings.Fields(stat)
	if len(fields) != 3 {
		return 0, fmt.Errorf("schedstat: %d fields, want 3", len(fields))
	}
	ns, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("schedstat: run-queue wait: %w", err)
	}
	return time.Duration(ns), nil
}
