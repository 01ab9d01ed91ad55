package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// record is what a cluster created that outlives its processes if they are killed: it is written
// before each thing is created, so that Stop, or the next Start on the machine after a run that was
// interrupted, removes exactly that (sweep). Nothing is removed by guessing: a process only if it
// still runs the command recorded for it, a mount only below the cluster's directory, cgroups only
// below the name the kubelet was given, iptables rules only in KUBE- chains and the jumps to them.
type record struct {
	path string
	// Dir is the cluster's directory: every mount below it is the cluster's.
	Dir string
	// Pids are the components' process groups, with the command each was started with.
	Pids  []int
	Argv0 map[int]string
	// ContainerdAddress is the socket of the cluster's containerd: its shims name it.
	ContainerdAddress string
	// CgroupRoot is the kubelet's cgroup of pods (cgroupfs driver), below each v1 controller.
	CgroupRoot string
	// Bridge is the pod network's bridge.
	Bridge string
	// IPTables says kube-proxy or the kubelet may have written KUBE- chains.
	IPTables bool
	// KubeProxy is the kube-proxy binary, whose --cleanup removes its rules.
	KubeProxy string
	// Sysctls are the kernel settings the kubelet changes, as they were before it started.
	Sysctls map[string]string
}

func loadRecord(path string) (*record, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r := &record{path: path}
	if err := json.Unmarshal(data, r); err != nil {
		return nil, fmt.Errorf("the record of the last cluster, %s: %w", path, err)
	}
	return r, nil
}

func (r *record) save() error {
	if r.Argv0 == nil {
		r.Argv0 = map[int]string{}
	}
	for _, pid := range r.Pids {
		if _, ok := r.Argv0[pid]; !ok {
			r.Argv0[pid] = argv0(pid)
		}
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := r.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, r.path)
}

// sweep removes what r records, each step whatever the others did, and returns what it could not.
func (r *record) sweep() error {
	var errs []error
	r.killRecorded()
	r.killShims()
	errs = append(errs, r.killPods())
	errs = append(errs, unmountBelow(r.Dir))
	errs = append(errs, r.removeCgroups())
	if r.IPTables {
		errs = append(errs, r.removeIPTables())
	}
	if r.Bridge != "" {
		errs = append(errs, removeLink(r.Bridge))
	}
	errs = append(errs, removeContainerLogLinks(r.Dir), writeSysctls(r.Sysctls))
	return errors.Join(errs...)
}

// containerLogLinks is where the kubelet links each container's log, whatever its --pod-logs-dir.
const containerLogLinks = "/var/log/containers"

// removeContainerLogLinks removes the kubelet's links to the logs of the cluster's containers.
func removeContainerLogLinks(dir string) error {
	links, _ := filepath.Glob(filepath.Join(containerLogLinks, "*.log"))
	var errs []error
	for _, l := range links {
		if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, dir+"/") {
			errs = append(errs, os.Remove(l))
		}
	}
	return errors.Join(errs...)
}

func readSysctls(names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", n)); err == nil {
			out[n] = strings.TrimSpace(string(v))
		}
	}
	return out
}

func writeSysctls(values map[string]string) error {
	var errs []error
	for n, v := range values {
		if err := os.WriteFile(filepath.Join("/proc/sys", n), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func (r *record) killRecorded() {
	for _, pid := range r.Pids {
		if want := r.Argv0[pid]; want != "" && argv0(pid) == want {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killShims kills the containerd shims that serve the cluster's containerd: each runs in a session
// of its own, and outlives containerd.
func (r *record) killShims() {
	if r.ContainerdAddress == "" {
		return
	}
	for _, pid := range pids() {
		cmdline := readCmdline(pid)
		if strings.Contains(cmdline[0], "containerd-shim") && slices.Contains(cmdline, r.ContainerdAddress) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killPods kills every process in the kubelet's pod cgroups, until none is left.
func (r *record) killPods() error {
	if r.CgroupRoot == "" {
		return nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		left := 0
		for _, dir := range r.cgroupDirs() {
			for _, pid := range cgroupProcs(dir) {
				left++
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of the cluster's pods are still running", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cgroupDirs lists the cgroups below CgroupRoot in every v1 controller and the unified hierarchy,
// deepest first; none before the kubelet was recorded, whose CgroupRoot is still empty: the walk
// would otherwise start at the controllers' roots and take in the machine's own cgroups.
func (r *record) cgroupDirs() []string {
	root := filepath.Clean(r.CgroupRoot)
	if r.CgroupRoot == "" || root == "/" || root == "." || strings.HasPrefix(root, "..") {
		return nil
	}
	var dirs []string
	roots, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", r.CgroupRoot))
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	slices.SortFunc(dirs, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
	return dirs
}

func (r *record) removeCgroups() error {
	var errs []error
	for _, dir := range r.cgroupDirs() {
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func cgroupProcs(dir string) []int {
	data, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(data)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// unmountBelow detaches every mount below dir, deepest first: containerd's snapshots and rootfs, the
// kubelet's volumes, the pods' network namespaces.
func unmountBelow(dir string) error {
	if dir == "" {
		return nil
	}
	var errs []error
	for range 3 { // a mount below another comes into view only once the other is gone
		mounts := mountsBelow(dir)
		if len(mounts) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", m, err))
			}
		}
	}
	return errors.Join(errs...)
}

func mountsBelow(dir string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// removeIPTables removes kube-proxy's rules with its own --cleanup, then every KUBE- chain left (the
// kubelet's), every jump to one and every rule of the tests' (ruleComment), in both address families.
func (r *record) removeIPTables() error {
	if r.KubeProxy != "" {
		if out, err := exec.Command(r.KubeProxy, "--cleanup").CombinedOutput(); err != nil {
			// Not fatal: what it leaves, the sweep below removes.
			fmt.Fprintf(os.Stderr, "cluster: kube-proxy --cleanup: %v: %s\n", err, out)
		}
	}
	var errs []error
	for _, family := range []string{"iptables", "ip6tables"} {
		for _, table := range []string{"filter", "nat", "mangle"} {
			errs = append(errs, removeKubeChains(family, table))
		}
	}
	return errors.Join(errs...)
}

func removeKubeChains(family, table string) error {
	saved, err := exec.Command(family+"-save", "-t", table).Output()
	if err != nil {
		return nil // no such table, or no such command: nothing of ours is there
	}
	if !bytes.Contains(saved, []byte("KUBE-")) && !bytes.Contains(saved, []byte(ruleComment)) {
		return nil
	}
	var kept bytes.Buffer
	for line := range strings.Lines(string(saved)) {
		if !strings.Contains(line, "KUBE-") && !strings.Contains(line, ruleComment) {
			kept.WriteString(line)
		}
	}
	cmd := exec.Command(family+"-restore", "-w")
	cmd.Stdin = &kept
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore of table %s without KUBE- chains: %w: %s", family, table, err, out)
	}
	return nil
}

func removeLink(name string) error {
	if _, err := os.Stat(filepath.Join("/sys/class/net", name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
		return fmt.Errorf("deleting link %s: %w: %s", name, err, out)
	}
	return nil
}

func pids() []int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, d := range dirs {
		if pid, err := strconv.Atoi(filepath.Base(d)); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func readCmdline(pid int) []string {
	data, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	return args
}

func argv0(pid int) string { return readCmdline(pid)[0] }
