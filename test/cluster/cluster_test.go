//go:build cluster

package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartLeavesNothing starts a cluster and stops it, twice: the second start must find the machine
// as the first left it, and after each stop nothing of the cluster may remain.
func TestStartLeavesNothing(t *testing.T) {
	for round := range 2 {
		began := time.Now()
		c, err := Start(context.Background(), Options{PauseImage: "sharestate.test/pause:none", Log: testLog{t},
			Dir: filepath.Join(t.TempDir(), "cluster")})
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		t.Logf("round %d: the cluster started in %.1fs", round, time.Since(began).Seconds())
		if err := c.Stop(); err != nil {
			t.Fatalf("round %d: stopping: %v", round, err)
		}
		assertNothingLeft(t, c.Dir)
	}
}

func assertNothingLeft(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join("/sys/class/net", bridgeName)); err == nil {
		t.Errorf("the bridge %s is still there", bridgeName)
	}
	if m := mountsBelow(dir); len(m) > 0 {
		t.Errorf("mounts left below %s: %v", dir, m)
	}
	if roots, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cgroupRoot)); len(roots) > 0 {
		t.Errorf("cgroups left: %v", roots)
	}
	for _, family := range []string{"iptables-save", "ip6tables-save"} {
		out, _ := exec.Command(family).Output()
		if strings.Contains(string(out), "KUBE-") {
			t.Errorf("%s still shows KUBE- chains:\n%s", family, out)
		}
	}
	for _, p := range pids() {
		if args := readCmdline(p); strings.Contains(strings.Join(args, " "), dir) {
			t.Errorf("process %d still runs: %v", p, args)
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
