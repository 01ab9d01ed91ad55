package bench

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
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
