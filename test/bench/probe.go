package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// requestCounter counts the HTTP requests of the clients whose transport it wraps (rest.Config.Wrap),
// retries included: every request the API server has to serve.
type requestCounter struct {
	n atomic.Int64
}

func (c *requestCounter) wrap(next http.RoundTripper) http.RoundTripper {
	return countingTransport{next: next, counter: c}
}

func (c *requestCounter) load() int64 { return c.n.Load() }

type countingTransport struct {
	next    http.RoundTripper
	counter *requestCounter
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.counter.n.Add(1)
	return t.next.RoundTrip(req)
}

// clockTicks is Linux's USER_HZ, the unit of the CPU times in /proc/<pid>/stat: 100 on every
// architecture Go supports.
const clockTicks = 100

// process is one process whose CPU time the bench reports.
type process struct {
	name string
	pid  int
}

// cpuProbe reads the CPU time used by this process and by the control plane's (envtest starts
// kube-apiserver and etcd as this process's children) from /proc. It has no processes where /proc
// cannot be read; the report then leaves the CPU figures out.
type cpuProbe struct {
	procs []process
}

// newCPUProbe finds the processes: this one, named "bench", and its children kube-apiserver and etcd.
func newCPUProbe() cpuProbe {
	self := os.Getpid()
	if _, err := readCPU(self); err != nil {
		return cpuProbe{}
	}
	children, err := childProcesses("kube-apiserver", "etcd")
	if err != nil {
		return cpuProbe{}
	}
	probe := cpuProbe{procs: append([]process{{name: "bench", pid: self}}, children...)}
	slices.SortStableFunc(probe.procs[1:], func(a, b process) int { return strings.Compare(b.name, a.name) })
	return probe
}

// childProcesses lists this process's children whose command is one of names, from /proc.
func childProcesses(names ...string) ([]process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var children []process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // it ended meanwhile
		}
		comm, ppid, _, err := parseStat(string(stat))
		if err == nil && ppid == self && slices.Contains(names, comm) {
			children = append(children, process{name: comm, pid: pid})
		}
	}
	return children, nil
}

// sample returns the CPU seconds each process has used so far, in the order of procs, and then those
// the whole machine has; one that cannot be read counts NaN. Nil without processes.
func (p cpuProbe) sample() []float64 {
	if len(p.procs) == 0 {
		return nil
	}
	out := make([]float64, len(p.procs)+1)
	for i, proc := range p.procs {
		cpu, err := readCPU(proc.pid)
		if err != nil {
			out[i] = math.NaN()
			continue
		}
		out[i] = cpu.Seconds()
	}
	out[len(p.procs)] = math.NaN()
	if stat, err := os.ReadFile("/proc/stat"); err == nil {
		if busy, err := parseMachineBusy(string(stat)); err == nil {
			out[len(p.procs)] = busy.Seconds()
		}
	}
	return out
}

// share turns the CPU seconds used over windows lasting elapsed (the difference of two samples) into
// the cores each process kept busy, and the cores the machine's other processes did, named "others":
// on a shared machine, they are the noise in the measurement. Nil when something was not read.
func (p cpuProbe) share(used []float64, elapsed time.Duration) []ProcessCPU {
	if len(p.procs) == 0 || len(used) != len(p.procs)+1 || elapsed <= 0 {
		return nil
	}
	out := make([]ProcessCPU, 0, len(used))
	others := used[len(p.procs)]
	for i, proc := range p.procs {
		out = append(out, ProcessCPU{Process: proc.name, Cores: used[i] / elapsed.Seconds()})
		others -= used[i]
	}
	// Process times and the machine's are read at slightly different moments; a small negative
	// remainder is that, not a measurement.
	return append(out, ProcessCPU{Process: "others", Cores: max(others, 0) / elapsed.Seconds()})
}

// parseMachineBusy reads the CPU time all processors spent busy (user, nice, system, irq, softirq
// and steal: all but idle and iowait) from the text of /proc/stat.
func parseMachineBusy(stat string) (time.Duration, error) {
	line, _, _ := strings.Cut(stat, "\n")
	fields := strings.Fields(line)
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, errors.New("proc stat: no cpu line")
	}
	var ticks int64
	for i, f := range fields[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		t, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("proc stat: cpu line: %w", err)
		}
		ticks += t
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

func readCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	_, _, cpu, err := parseStat(string(stat))
	return cpu, err
}

// parseStat reads the command name, the parent's pid and the CPU time used (user plus system) from
// the text of /proc/<pid>/stat (proc(5)). The name is in parentheses and may itself contain spaces
// and parentheses, so the fields are counted from the last ')'.
func parseStat(stat string) (comm string, ppid int, cpu time.Duration, err error) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open {
		return "", 0, 0, errors.New("proc stat: no command name")
	}
	// After the name: state (field 3), ppid (4), ..., utime (14), stime (15).
	fields := strings.Fields(stat[end+1:])
	if len(fields) < 13 {
		return "", 0, 0, fmt.Errorf("proc stat: %d fields after the command name, want at least 13", len(fields))
	}
	ppid, err = strconv.Atoi(fields[1])
	if err != nil {
		return "", 0, 0, fmt.Errorf("proc stat: ppid: %w", err)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		t, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return "", 0, 0, fmt.Errorf("proc stat: cpu time: %w", err)
		}
		ticks += t
	}
	return stat[open+1 : end], ppid, time.Duration(ticks) * time.Second / clockTicks, nil
}

// profiler writes CPU profiles of a scenario's measured window into dir: <scenario>.bench.pprof of
// this process and <scenario>.apiserver.pprof of kube-apiserver (from its /debug/pprof, over the
// window's length rounded up to whole seconds). Read them with `go tool pprof`.
type profiler struct {
	dir    string
	config *rest.Config // an administrator's, not counted

	file      *os.File
	apiserver chan error
}

// start begins both profiles; the API server's is fetched in the background.
func (p *profiler) start(ctx context.Context, scenario string, length time.Duration) error {
	f, err := os.Create(filepath.Join(p.dir, scenario+".bench.pprof"))
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	p.file = f
	p.apiserver = make(chan error, 1)
	go func() {
		p.apiserver <- p.fetchAPIServerProfile(ctx, filepath.Join(p.dir, scenario+".apiserver.pprof"), length)
	}()
	return nil
}

// stop ends this process's profile at once and waits for the API server's.
func (p *profiler) stop() error {
	if p.file == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.file.Close()
	p.file = nil
	return errors.Join(err, <-p.apiserver)
}

func (p *profiler) fetchAPIServerProfile(ctx context.Context, path string, length time.Duration) error {
	return saveAPIServerProfile(ctx, p.config, "profile", length, path)
}

// saveAPIServerProfile writes kube-apiserver's /debug/pprof/<kind> into path: a CPU profile
// ("profile") over length rounded up to whole seconds, or a snapshot ("heap") when length is zero.
func saveAPIServerProfile(ctx context.Context, config *rest.Config, kind string, length time.Duration, path string) error {
	seconds := math.Ceil(length.Seconds())
	cfg := rest.CopyConfig(config)
	cfg.Timeout = time.Duration(seconds)*time.Second + time.Minute
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	req := dc.RESTClient().Get().AbsPath("/debug/pprof/" + kind)
	if seconds > 0 {
		req = req.Param("seconds", strconv.Itoa(int(seconds)))
	}
	profile, err := req.DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("fetching the API server's %s profile: %w", kind, err)
	}
	return os.WriteFile(path, profile, 0o644)
}
