package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ParseCPUList reads a comma-separated list of CPU numbers, e.g. "1" or "2,3". It refuses a list
// that names a CPU this machine does not have or that leaves none for the other processes.
func ParseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, f := range strings.Split(s, ",") {
		cpu, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || cpu < 0 || cpu >= runtime.NumCPU() {
			return nil, fmt.Errorf("CPU %q: want a number from 0 to %d (this machine has %d CPUs)", f, runtime.NumCPU()-1, runtime.NumCPU())
		}
		if !slices.Contains(cpus, cpu) {
			cpus = append(cpus, cpu)
		}
	}
	if len(cpus) >= runtime.NumCPU() {
		return nil, fmt.Errorf("CPUs %q leave none for the brokers: name at most %d of %d", s, runtime.NumCPU()-1, runtime.NumCPU())
	}
	slices.Sort(cpus)
	return cpus, nil
}

// otherCPUs are this machine's CPUs not in cpus.
func otherCPUs(cpus []int) []int {
	var rest []int
	for cpu := range runtime.NumCPU() {
		if !slices.Contains(cpus, cpu) {
			rest = append(rest, cpu)
		}
	}
	return rest
}

// pinProcess keeps every thread of process pid on cpus. A thread started later inherits the
// affinity of the thread that starts it, and a child process that of the thread that forks it, so
// pinning every thread now pins what the process starts from now on.
func pinProcess(pid int, cpus []int) error {
	var set unix.CPUSet
	for _, cpu := range cpus {
		set.Set(cpu)
	}
	return setAffinity(pid, &set)
}

// setAffinity sets the affinity of every thread of process pid.
func setAffinity(pid int, set *unix.CPUSet) error {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH { // ESRCH: the thread ended meanwhile
			return fmt.Errorf("setting the CPUs of thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}

// pinSelf keeps this process, and what it starts from now on, on cpus; restore gives it back the
// CPUs it had, so that what runs after (other scenarios, their control plane) is not pinned too.
func pinSelf(cpus []int) (restore func() error, err error) {
	var saved unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		return nil, err
	}
	if err := pinProcess(os.Getpid(), cpus); err != nil {
		return nil, err
	}
	return func() error { return setAffinity(os.Getpid(), &saved) }, nil
}

// pinControlPlane puts the control plane (kube-apiserver and etcd, children of this process) on
// cpus and this process, with everything it starts until restore (brokers, sidecars, operator,
// clients), on the other CPUs: the shape of a production cluster, whose control plane has machines
// of its own, on one machine.
func pinControlPlane(cpus []int) (restore func() error, err error) {
	pids := append(controlPlanePIDs("kube-apiserver"), controlPlanePIDs("etcd")...)
	if len(pids) < 2 {
		return nil, fmt.Errorf("found %d control plane processes among this process's children, want kube-apiserver and etcd", len(pids))
	}
	for _, pid := range pids {
		if err := pinProcess(pid, cpus); err != nil {
			return nil, err
		}
	}
	return pinSelf(otherCPUs(cpus))
}
