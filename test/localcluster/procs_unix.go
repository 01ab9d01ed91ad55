//go:build unix

package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// childrenRunning returns the pids of this process's children that run one of the binaries (by the
// path they were started with). envtest keeps its processes to itself; this is how a start that is
// abandoned half-way finds the ones it had started.
func childrenRunning(binaries ...string) []int {
	procs, err := processTable()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, p := range procs {
		for _, b := range binaries {
			if p.ppid == self && p.argv0 == b {
				pids = append(pids, p.pid)
			}
		}
	}
	return pids
}

// signalGroups sends sig to the process groups the pids lead: envtest starts each control-plane
// process as the leader of a group of its own, and stops it so too.
func signalGroups(pids []int, sig syscall.Signal) {
	for _, pid := range pids {
		_ = syscall.Kill(-pid, sig)
	}
}

type proc struct {
	pid, ppid int
	argv0     string
}

// processTable lists the processes from /proc where there is one, else from ps.
func processTable() ([]proc, error) {
	if _, err := os.Stat("/proc/self/stat"); err == nil {
		return procTable()
	}
	return psTable()
}

func procTable() ([]proc, error) {
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return nil, err
	}
	var procs []proc
	for _, dir := range dirs {
		pid, err := strconv.Atoi(filepath.Base(dir))
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue // it ended meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses, so read after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		procs = append(procs, proc{pid: pid, ppid: ppid, argv0: string(argv0)})
	}
	return procs, nil
}

func psTable() ([]proc, error) {
	out, err := exec.Command("ps", "-A", "-o", "pid=,ppid=,args=").Output()
	if err != nil {
		return nil, fmt.Errorf("listing processes with ps: %w", err)
	}
	var procs []proc
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		ppid, _ := strconv.Atoi(f[1])
		procs = append(procs, proc{pid: pid, ppid: ppid, argv0: f[2]})
	}
	return procs, nil
}
