package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestParseCPUList(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	cpus, err := ParseCPUList(" 1,1")
	if err != nil || len(cpus) != 1 || cpus[0] != 1 {
		t.Fatalf("ParseCPUList(\" 1,1\") = %v, %v; want [1]", cpus, err)
	}
	last := strconv.Itoa(runtime.NumCPU())
	for _, bad := range []string{"", "x", "-1", last} {
		if _, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) accepted", bad)
		}
	}
	all := "0"
	for cpu := 1; cpu < runtime.NumCPU(); cpu++ {
		all += "," + strconv.Itoa(cpu)
	}
	if _, err := ParseCPUList(all); err == nil {
		t.Errorf("ParseCPUList(%q) accepted every CPU, leaving none for the brokers", all)
	}
}

// TestPinProcessPinsItsChildren pins a child process and checks that the kernel reports the
// affinity for it, and that a process it starts afterwards inherits it.
func TestPinProcessPinsItsChildren(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	cmd := exec.Command("sh", "-c", "read line; sh -c 'grep Cpus_allowed_list /proc/$$/status'")
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := pinProcess(cmd.Process.Pid, []int{1}); err != nil {
		t.Fatal(err)
	}
	if got, err := processCPUs(cmd.Process.Pid); err != nil || got != "1" {
		t.Errorf("the pinned process may run on %q (%v), want 1", got, err)
	}
	_, _ = in.Write([]byte("go\n"))
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(out.Name())
	if want := "Cpus_allowed_list:\t1\n"; string(got) != want {
		t.Errorf("its child reported %q, want %q", got, want)
	}
	if got := otherCPUs([]int{1}); len(got) != runtime.NumCPU()-1 || got[0] != 0 {
		t.Errorf("otherCPUs([1]) = %v", got)
	}
}

// TestPinSelfRestores pins this process to CPU 1 and gives it back the CPUs it had: scenarios run
// after the kafka family must not stay pinned.
func TestPinSelfRestores(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	before, err := processCPUs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	restore, err := pinSelf([]int{1})
	if err != nil {
		t.Fatal(err)
	}
	pinned, _ := processCPUs(os.Getpid())
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	if pinned != "1" {
		t.Errorf("pinned, this process may run on %q, want 1", pinned)
	}
	if after, _ := processCPUs(os.Getpid()); after != before {
		t.Errorf("restored, this process may run on %q, want %q as before", after, before)
	}
}

// processCPUs is the CPU list process pid may run on, as the kernel reports it.
func processCPUs(pid int) (string, error) {
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("no Cpus_allowed_list in /proc/%d/status", pid)
}
