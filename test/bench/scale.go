package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// ScaleScenario is the name that selects the scale scenarios (`-scenarios scale`): for each of
// Config.ScaleSizes, a control plane of its own with that many initialized share-partitions, the
// operator and one sidecar per namespace as processes of their own, and an open-loop write load.
const ScaleScenario = "scale"

// DefaultScaleSizes are the partition counts of the scale scenarios.
var DefaultScaleSizes = []int{1000, 5000, 10000}

// The load levels, as fractions of the write capacity measured in the same run.
var scaleLoads = []float64{0.5, 0.8}

// scaleCapacityWriters is the closed loop that measures the write capacity: enough concurrent writes
// to keep the sidecars and the API server busy.
const scaleCapacityWriters = 64

// ParseScaleSizes reads a comma-separated list of partition counts.
func ParseScaleSizes(s string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 8 {
			return nil, fmt.Errorf("scale size %q: want a whole number of partitions, at least 8", f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// runScale runs the scale scenario of every size and prints their lines and targets to out.
func runScale(ctx context.Context, cfg Config, out, log io.Writer) error {
	dir, err := os.MkdirTemp("", "sharestate-scale-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	fmt.Fprintln(log, "bench: scale: building the operator and the sidecar")
	bins, err := buildBinaries(ctx, dir)
	if err != nil {
		return err
	}
	sizes := cfg.ScaleSizes
	if len(sizes) == 0 {
		sizes = DefaultScaleSizes
	}
	for _, n := range sizes {
		res, err := runScaleSize(ctx, cfg, bins, n, log)
		if err != nil {
			return fmt.Errorf("scale-%d: %w", n, err)
		}
		fmt.Fprintln(out)
		for _, l := range res.levels {
			fmt.Fprintln(out, res.line(l))
		}
		fmt.Fprintln(out, res.verdicts())
	}
	return nil
}

// scaleResult is one size's measurement.
type scaleResult struct {
	partitions, fenced      int
	lonePercentile50        time.Duration
	capacityPerSecond       float64
	levels                  []scaleLevel
	fence, raw              time.Duration
	sidecarCacheBoundMB     float64
	operatorRSS, sidecarRSS float64  // the largest seen, MB
	operatorIdleCores       float64  // the operator's CPU in a window without writes, in cores
	apiserverEnv            []string // Config.ScaleAPIServerEnv: a diagnostic run
}

// scaleLevel is the open loop at one fraction of the capacity.
type scaleLevel struct {
	load                                            float64
	run                                             openResult
	operatorMillisPerWrite, apiserverMillisPerWrite float64
	operatorRSS, sidecarRSS                         float64 // MB at the window's end (the largest sidecar)
	operatorHeap                                    float64 // MB of the operator's Go heap objects at the window's end
	operatorCores                                   float64 // the operator's CPU in the window, in cores
	// partitionWatchBytesPerWrite is what the operator's SharePartitionState watches received in the
	// window, per write (its sharestate_operator_watch_bytes_total); NaN when it does not count them.
	partitionWatchBytesPerWrite float64
	othersCores                 float64
}

// runScaleSize sets up n partitions on a control plane of its own and measures them.
func runScaleSize(ctx context.Context, cfg Config, bins binaries, n int, log io.Writer) (*scaleResult, error) {
	dir, err := os.MkdirTemp("", fmt.Sprintf("sharestate-scale-%d-", n))
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "bench: scale-%d: starting a control plane; logs in %s\n", n, dir)
	controlPlaneLogs := ""
	if cfg.ProfileDir != "" {
		// Kept with the profiles: the spells of slow writes are set beside kube-apiserver's and etcd's
		// warnings (and, with GODEBUG=gctrace=1, their garbage collections) by wall-clock time.
		controlPlaneLogs = filepath.Join(cfg.ProfileDir, fmt.Sprintf("scale-%d-control-plane", n))
		fmt.Fprintf(log, "bench: scale-%d: the control plane's own logs in %s\n", n, controlPlaneLogs)
	}
	if len(cfg.ScaleAPIServerEnv) > 0 {
		fmt.Fprintf(log, "bench: scale-%d: kube-apiserver runs with %s added to its environment (a diagnostic: the targets are not the issue's)\n",
			n, strings.Join(cfg.ScaleAPIServerEnv, " "))
	}
	env, err := testenv.StartWith(testenv.Options{LogDir: controlPlaneLogs, APIServerEnv: cfg.ScaleAPIServerEnv})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer func() { _ = env.Stop() }()
	s := &scaleRun{cfg: cfg, bins: bins, dir: dir, log: log, n: n, env: env}
	res, err := s.run(ctx)
	s.stopChildren()
	if err == nil && cfg.ProfileDir == "" {
		_ = os.RemoveAll(dir) // the processes' logs are kept when the run failed, or with -profile-dir
	}
	return res, err
}

// scaleRun is one size being measured.
type scaleRun struct {
	cfg  Config
	bins binaries
	dir  string
	log  io.Writer
	n    int
	env  *testenv.Env

	client    client.WithWatch
	cluster   *scaleCluster
	apiserver int
	operator  *child
	sidecars  []*child
	clients   []*kafkawire.Client // of the sidecars
	write     writeFunc

	operatorMetrics string   // address of the operator's metrics, plain HTTP
	sidecarMetrics  []string // addresses of the sidecars' metrics, plain HTTP
	operatorPprof   string   // address of the operator's profiles, with -profile-dir
}

func (s *scaleRun) run(ctx context.Context) (*scaleResult, error) {
	if err := s.setUp(ctx); err != nil {
		return nil, err
	}
	res := &scaleResult{partitions: s.n, fenced: s.cluster.victims, sidecarCacheBoundMB: float64(persister.DefaultMaxCacheBytes) / (1 << 20),
		apiserverEnv: s.cfg.ScaleAPIServerEnv}
	lone, err := measure(ctx, []writeFunc{s.write}, window{warmup: s.cfg.Warmup / 2, duration: s.cfg.Duration / 2}, func(bool) {})
	if err != nil {
		return nil, fmt.Errorf("lone writes: %w", err)
	}
	if len(lone.latencies) == 0 {
		return nil, errors.Join(errors.New("lone writes: none succeeded in the window"), lone.firstErr)
	}
	res.lonePercentile50 = percentile(lone.latencies, 0.5)
	if res.operatorIdleCores, err = s.idleOperatorCores(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(s.log, "bench: scale-%d: measuring the write capacity (%d writers, closed loop, %d windows)\n", s.n, scaleCapacityWriters, scaleCapacityWindows)
	if res.capacityPerSecond, err = s.medianCapacity(ctx); err != nil {
		return nil, err
	}
	for _, load := range scaleLoads {
		level, err := s.openLoopLevel(ctx, res, load)
		if err != nil {
			return nil, err
		}
		res.levels = append(res.levels, level)
	}
	// Once more after the loads, for the log only: whether the capacity the levels were set from
	// still held by then.
	if again, err := s.capacity(ctx); err == nil {
		fmt.Fprintf(s.log, "bench: scale-%d: the write capacity measured again after the loads: %.1f writes/s (%.2f of the first)\n",
			s.n, again, again/res.capacityPerSecond)
	}
	// Last, as it changes the cluster: the fence, and the raw updates that raise the same epochs again.
	if res.fence, res.raw, err = s.fenceUnderLoad(ctx, scaleLoads[0]*res.capacityPerSecond); err != nil {
		return nil, err
	}
	return res, nil
}

// idleOperatorCores measures the operator's CPU, in cores, in a window of -duration without writes:
// what it spends on the partitions alone (its resync, the groups' refreshes), for the load levels'
// to be set against.
func (s *scaleRun) idleOperatorCores(ctx context.Context) (float64, error) {
	fmt.Fprintf(s.log, "bench: scale-%d: the operator's CPU with no writes, for %s\n", s.n, s.cfg.Duration)
	before, from := s.sampleCPU(), time.Now()
	if !sleepUntil(ctx, from.Add(s.cfg.Duration)) {
		return 0, ctx.Err()
	}
	used := s.sampleCPU().minus(before)
	return used.operator / time.Since(from).Seconds(), nil
}

// scaleCapacityWindows is how many closed-loop windows the capacity is the median of. In run 45 a
// window now and then fell to 0.57–0.70 of the others (one sidecar doing next to nothing for about ten
// seconds, kube-apiserver idle meanwhile), and one window alone set the load levels from whatever it
// happened to catch.
const scaleCapacityWindows = 3

// medianCapacity measures the capacity in scaleCapacityWindows windows, logs each, and returns their
// median: a window caught in a stall of the path does not set the load levels.
func (s *scaleRun) medianCapacity(ctx context.Context) (float64, error) {
	rates := make([]float64, 0, scaleCapacityWindows)
	for i := range scaleCapacityWindows {
		before := s.samplePersisters(ctx)
		rate, err := s.capacity(ctx)
		if err != nil {
			return 0, err
		}
		rates = append(rates, rate)
		persisters := "the sidecars' persisters could not be read"
		if after := s.samplePersisters(ctx); before != nil && after != nil {
			persisters = "the sidecars' persisters: " + after.minus(*before).describe()
		}
		fmt.Fprintf(s.log, "bench: scale-%d: capacity window %d of %d: %.1f writes/s; %s\n", s.n, i+1, scaleCapacityWindows, rate, persisters)
	}
	return median(rates), nil
}

// median is the middle of rates (the mean of the two middle ones for an even count); rates is sorted
// in place.
func median(rates []float64) float64 {
	slices.Sort(rates)
	n := len(rates)
	if n%2 == 1 {
		return rates[n/2]
	}
	return (rates[n/2-1] + rates[n/2]) / 2
}

// capacity measures the writes per second of scaleCapacityWriters writers in a closed loop.
func (s *scaleRun) capacity(ctx context.Context) (float64, error) {
	writers := make([]writeFunc, scaleCapacityWriters)
	for i := range writers {
		writers[i] = s.write
	}
	capacity, err := measure(ctx, writers, window{warmup: s.cfg.Warmup, duration: s.cfg.Duration}, func(bool) {})
	if err != nil {
		return 0, fmt.Errorf("capacity: %w", err)
	}
	if capacity.failed > 0 || len(capacity.latencies) == 0 {
		return 0, errors.Join(fmt.Errorf("capacity: %d writes failed, %d succeeded", capacity.failed, len(capacity.latencies)), capacity.firstErr)
	}
	return float64(len(capacity.latencies)) / capacity.elapsed.Seconds(), nil
}

// setUp creates the partitions and starts the sidecars and the operator, and waits until the operator
// has seen every partition's leader alive.
func (s *scaleRun) setUp(ctx context.Context) error {
	cfg := rest.CopyConfig(s.env.Config)
	cfg.QPS, cfg.Burst, cfg.Timeout = -1, -1, requestTimeout
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: s.env.Scheme})
	if err != nil {
		return err
	}
	s.client = c
	if s.apiserver, err = findAPIServer(s.env.Config); err != nil {
		return err
	}
	layout := newScaleLayout(s.n)
	fmt.Fprintf(s.log, "bench: scale-%d: creating %d partitions in %d groups over %d namespaces\n", s.n, s.n, len(layout.groups), len(layout.namespaces))
	began := time.Now()
	if s.cluster, err = createScaleCluster(ctx, c, layout); err != nil {
		return err
	}
	fmt.Fprintf(s.log, "bench: scale-%d: created in %s\n", s.n, time.Since(began).Round(time.Second))
	kubeconfig, err := writeKubeconfig(s.dir, s.env.Config)
	if err != nil {
		return err
	}
	stores := map[string]sharestate.Store{}
	for _, ns := range layout.namespaces {
		store, err := s.startSidecar(ctx, kubeconfig, ns)
		if err != nil {
			return err
		}
		stores[ns] = store
	}
	s.write = roundRobinWrites(layout.loadTargets(stores))
	if err := s.startOperator(ctx, kubeconfig); err != nil {
		return err
	}
	began = time.Now()
	if err := s.waitObserved(ctx); err != nil {
		return err
	}
	fmt.Fprintf(s.log, "bench: scale-%d: the operator saw every partition %s after it started\n", s.n, time.Since(began).Round(time.Second))
	began = time.Now()
	if err := layout.readThroughSidecars(ctx, stores); err != nil {
		return err
	}
	fmt.Fprintf(s.log, "bench: scale-%d: the load brokers read their partitions through their sidecars in %s\n", s.n, time.Since(began).Round(time.Second))
	return nil
}

// startSidecar runs the load broker's sidecar of namespace ns with its production defaults.
func (s *scaleRun) startSidecar(ctx context.Context, kubeconfig, ns string) (sharestate.Store, error) {
	listen, err := freePort()
	if err != nil {
		return nil, err
	}
	health, err := freePort()
	if err != nil {
		return nil, err
	}
	metrics, err := freePort()
	if err != nil {
		return nil, err
	}
	pod := s.cluster.loadPods[ns]
	args := []string{"--kubeconfig=" + kubeconfig, "--namespace=" + ns, fmt.Sprintf("--broker-id=%d", loadBrokerID),
		"--listen-address=" + listen, "--health-probe-bind-address=" + health,
		"--metrics-bind-address=" + metrics, "--metrics-secure=false"}
	env := []string{"POD_NAME=" + pod.Name, "POD_UID=" + string(pod.UID)}
	sidecar, err := startChild(ctx, s.dir, "sidecar-"+ns, s.bins.sidecar, args, env, healthy(health, "/readyz"))
	if err != nil {
		return nil, err
	}
	s.sidecars = append(s.sidecars, sidecar)
	s.sidecarMetrics = append(s.sidecarMetrics, metrics)
	wire, err := kafkawire.NewClient(kafkawire.ClientOptions{Address: listen})
	if err != nil {
		return nil, err
	}
	s.clients = append(s.clients, wire)
	return wire, nil
}

// startOperator runs the operator with its production defaults (its health probes moved off :8081).
func (s *scaleRun) startOperator(ctx context.Context, kubeconfig string) error {
	health, err := freePort()
	if err != nil {
		return err
	}
	if s.operatorMetrics, err = freePort(); err != nil {
		return err
	}
	// Metrics (off by default) are served only to read the Go heap's size: serving them costs nothing
	// until they are scraped, once per window.
	args := []string{"--kubeconfig=" + kubeconfig, "--health-probe-bind-address=" + health,
		"--metrics-bind-address=" + s.operatorMetrics, "--metrics-secure=false"}
	if s.cfg.ProfileDir != "" {
		if s.operatorPprof, err = freePort(); err != nil {
			return err
		}
		args = append(args, "--pprof-bind-address="+s.operatorPprof)
	}
	s.operator, err = startChild(ctx, s.dir, "operator", s.bins.operator, args, nil, healthy(health, "/readyz"))
	return err
}

// stopChildren closes the clients of the sidecars and stops the processes the run started.
func (s *scaleRun) stopChildren() {
	for _, c := range s.clients {
		_ = c.Close()
	}
	if s.operator != nil {
		s.operator.stop()
	}
	for _, c := range s.sidecars {
		c.stop()
	}
}

// waitObserved waits until the operator has reported every partition's leader alive (its Fenced
// condition, LeaderAlive), reading the partitions a page at a time.
func (s *scaleRun) waitObserved(ctx context.Context) error {
	deadline := time.Now().Add(15 * time.Minute)
	for {
		seen, err := s.countObserved(ctx)
		if err == nil && seen == s.n {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("the operator saw %d of %d partitions' leaders; its log is in %s", seen, s.n, s.dir), err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

func (s *scaleRun) countObserved(ctx context.Context) (int, error) {
	seen := 0
	opts := &client.ListOptions{Limit: 500}
	for {
		var page sharestatev1.SharePartitionStateList
		if err := s.client.List(ctx, &page, opts); err != nil {
			return seen, err
		}
		for i := range page.Items {
			if c := meta.FindStatusCondition(page.Items[i].Status.Conditions, sharestatev1.ConditionFenced); c != nil && c.Reason == sharestatev1.ReasonLeaderAlive {
				seen++
			}
		}
		if page.Continue == "" {
			return seen, nil
		}
		opts.Continue = page.Continue
	}
}

// openLoopLevel runs the open loop at load times the capacity: a warm-up, then the measured window.
func (s *scaleRun) openLoopLevel(ctx context.Context, res *scaleResult, load float64) (scaleLevel, error) {
	level := scaleLevel{load: load}
	rate := load * res.capacityPerSecond
	fmt.Fprintf(s.log, "bench: scale-%d: open loop at %.0f%% of %.0f writes/s: %s warm-up, then %s measured\n",
		s.n, 100*load, res.capacityPerSecond, s.cfg.Warmup, s.cfg.Duration)
	loop := startOpenLoop(ctx, rate, s.write)
	defer loop.stopAndWait()
	if !sleepUntil(ctx, time.Now().Add(s.cfg.Warmup)) {
		return level, ctx.Err()
	}
	gcBefore, gcBeforeOK := sampleAPIServerGC(ctx, s.env.Config)
	persistersBefore := s.samplePersisters(ctx)
	watchBefore := s.partitionWatchBytes(ctx)
	from, before := loop.now(), s.sampleCPU()
	profiled := s.profileWindow(ctx, fmt.Sprintf("scale-%d-load-%.0f", s.n, 100*load))
	if !sleepUntil(ctx, time.Now().Add(s.cfg.Duration)) {
		return level, ctx.Err()
	}
	to, after := loop.now(), s.sampleCPU()
	watchAfter := s.partitionWatchBytes(ctx)
	gcAfter, gcAfterOK := sampleAPIServerGC(ctx, s.env.Config)
	persistersAfter := s.samplePersisters(ctx)
	if err := <-profiled; err != nil {
		fmt.Fprintf(s.log, "bench: scale-%d: profiling the operator and kube-apiserver: %v\n", s.n, err)
	}
	level.operatorRSS, level.sidecarRSS = s.sampleRSS()
	level.operatorHeap = s.operatorHeapMB(ctx)
	res.operatorRSS, res.sidecarRSS = max(res.operatorRSS, level.operatorRSS), max(res.sidecarRSS, level.sidecarRSS)
	loop.stopAndWait() // the window's writes have their answers
	level.run = loop.window(from, to)
	slow := slowWriteThreshold * res.lonePercentile50
	fmt.Fprintf(s.log, "bench: scale-%d: at %.0f%% (the window from %s), writes slower than %.0f ms (%d lone p50s): %s\n",
		s.n, 100*load, loop.begin.Add(from).Format("15:04:05.000"), millis(slow), slowWriteThreshold,
		describeSlowSpells(loop.slowSpells(from, to, slow)))
	writes := level.run.achievedPerSecond * level.run.seconds
	if writes == 0 {
		return level, fmt.Errorf("no write succeeded in the window at %.0f%% load", 100*load)
	}
	used := after.minus(before)
	fmt.Fprintf(s.log, "bench: scale-%d: at %.0f%%, the machine was %s; per write the sidecars spent %.2f ms of CPU, the bench %.2f\n",
		s.n, 100*load, used.describe(level.run.seconds), used.sidecars*1000/writes, used.bench*1000/writes)
	if gcBeforeOK && gcAfterOK {
		fmt.Fprintf(s.log, "bench: scale-%d: at %.0f%%, kube-apiserver's Go runtime counted %s\n",
			s.n, 100*load, describeGC(gcBefore, gcAfter, used.apiserver))
	}
	if persistersBefore != nil && persistersAfter != nil {
		fmt.Fprintf(s.log, "bench: scale-%d: at %.0f%%, the sidecars' persisters: %s; the bench's writes took %.1f ms on average from their arrival\n",
			s.n, 100*load, persistersAfter.minus(*persistersBefore).describe(), millis(meanLatency(level.run.latencies)))
	}
	level.operatorMillisPerWrite = used.operator * 1000 / writes
	level.operatorCores = used.operator / level.run.seconds
	level.partitionWatchBytesPerWrite = (watchAfter - watchBefore) / writes
	level.apiserverMillisPerWrite = used.apiserver * 1000 / writes
	level.othersCores = used.others / level.run.seconds
	return level, nil
}

// profileWindow, with -profile-dir, saves the operator's CPU profile of the -duration that starts now
// (<name>.operator.pprof), and at its end the heap profiles of the operator and of kube-apiserver
// (<name>.operator-heap.pprof, <name>.apiserver-heap.pprof): what each process holds, by the code that
// allocated it. kube-apiserver is not CPU-profiled here: it is the path's bottleneck, and its profiling
// would slow the very writes measured. The channel reports when all three are written, or why not.
func (s *scaleRun) profileWindow(ctx context.Context, name string) <-chan error {
	done := make(chan error, 1)
	if s.operatorPprof == "" {
		done <- nil
		return done
	}
	path := func(suffix string) string { return filepath.Join(s.cfg.ProfileDir, name+suffix) }
	seconds := int(math.Ceil(s.cfg.Duration.Seconds()))
	go func() {
		base := "http://" + s.operatorPprof + "/debug/pprof/"
		err := saveURL(ctx, base+"profile?seconds="+strconv.Itoa(seconds), path(".operator.pprof"))
		if err == nil {
			err = saveURL(ctx, base+"heap", path(".operator-heap.pprof"))
		}
		if err == nil {
			err = saveAPIServerProfile(ctx, s.env.Config, "heap", 0, path(".apiserver-heap.pprof"))
		}
		done <- err
	}()
	return done
}

// saveURL writes the body of GET url into path.
func saveURL(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// scaleCPU is CPU seconds used: by the operator, by the API server, by the sidecars, by this bench's
// own process, by the whole machine, and by the machine's processes that are not this bench's
// (others: the noise).
type scaleCPU struct {
	operator, apiserver, sidecars, bench, machine, others float64
}

func (a scaleCPU) minus(b scaleCPU) scaleCPU {
	return scaleCPU{operator: a.operator - b.operator, apiserver: a.apiserver - b.apiserver, sidecars: a.sidecars - b.sidecars,
		bench: a.bench - b.bench, machine: a.machine - b.machine, others: max(a.others-b.others, 0)}
}

// describe says how busy the machine was over seconds, and who kept it busy.
func (a scaleCPU) describe(seconds float64) string {
	operator, operatorUsed := fmt.Sprintf("%.2f", a.operator/seconds), a.operator
	if math.IsNaN(a.operator) { // stopped, as it is for the fence's raw baseline
		operator, operatorUsed = "not running", 0
	}
	rest := a.machine - a.apiserver - a.sidecars - operatorUsed - a.bench
	return fmt.Sprintf("%.2f of %d cores busy: kube-apiserver %.2f, the sidecars %.2f, the operator %s, the bench %.2f, etcd and the rest %.2f",
		a.machine/seconds, runtime.NumCPU(), a.apiserver/seconds, a.sidecars/seconds, operator, a.bench/seconds, rest/seconds)
}

// sampleCPU reads the CPU seconds used so far. others is the machine's busy time less this process's
// and its children's (the control plane, the operator, the sidecars); NaN where /proc cannot be read.
func (s *scaleRun) sampleCPU() scaleCPU {
	out := s.sampleProcesses(readCPU)
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return out
	}
	busy, err := parseMachineBusy(string(stat))
	if err != nil {
		return out
	}
	out.machine = busy.Seconds()
	out.others = out.machine - out.bench - childrenCPU()
	return out
}

// sampleRunQueueWaits reads how long, so far, each process's threads waited for a core
// (readRunQueueWait), in seconds, in the fields of a scaleCPU; the machine's fields are NaN.
func (s *scaleRun) sampleRunQueueWaits() scaleCPU { return s.sampleProcesses(readRunQueueWait) }

// sampleProcesses reads one time of each of the run's processes, in seconds, the sidecars' summed; NaN
// for a process whose /proc cannot be read (one that is stopped), and for the machine's fields.
func (s *scaleRun) sampleProcesses(read func(pid int) (time.Duration, error)) scaleCPU {
	seconds := func(pid int) float64 {
		d, err := read(pid)
		if err != nil {
			return math.NaN()
		}
		return d.Seconds()
	}
	out := scaleCPU{operator: seconds(s.operator.pid()), apiserver: seconds(s.apiserver), bench: seconds(os.Getpid()),
		machine: math.NaN(), others: math.NaN()}
	for _, c := range s.sidecars {
		out.sidecars += seconds(c.pid())
	}
	return out
}

// describeWaits says how long each process's threads waited for a core over a phase of seconds, in
// all and as the number of them waiting at an average moment.
func (a scaleCPU) describeWaits(seconds float64) string {
	per := func(waited float64) string {
		if math.IsNaN(waited) {
			return "not running"
		}
		return fmt.Sprintf("%.2f s (%.2f threads)", waited, waited/seconds)
	}
	return fmt.Sprintf("kube-apiserver %s, the sidecars %s, the operator %s, the bench %s",
		per(a.apiserver), per(a.sidecars), per(a.operator), per(a.bench))
}

// childrenCPU sums the CPU seconds of this process's children.
func childrenCPU() float64 {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return math.NaN()
	}
	self, total := os.Getpid(), 0.0
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if _, ppid, cpu, err := parseStat(string(stat)); err == nil && ppid == self {
			total += cpu.Seconds()
		}
	}
	return total
}

// sampleRSS reads the operator's resident memory and the largest sidecar's, in MB.
func (s *scaleRun) sampleRSS() (operatorMB, sidecarMB float64) {
	mb := func(pid int) float64 {
		rss, err := readRSS(pid)
		if err != nil {
			return math.NaN()
		}
		return float64(rss) / (1 << 20)
	}
	operatorMB = mb(s.operator.pid())
	for _, c := range s.sidecars {
		sidecarMB = max(sidecarMB, mb(c.pid()))
	}
	return operatorMB, sidecarMB
}

// operatorHeapMB reads the operator's live Go heap (go_memstats_heap_alloc_bytes: objects reachable
// or not yet swept) from its metrics, in MB; NaN when they cannot be read.
func (s *scaleRun) operatorHeapMB(ctx context.Context) float64 {
	samples, err := s.operatorSamples(ctx)
	if err != nil {
		return math.NaN()
	}
	return samples.sum("go_memstats_heap_alloc_bytes", "") / (1 << 20)
}

// partitionWatchBytes reads the bytes the operator's SharePartitionState watches have received so far
// (sharestate_operator_watch_bytes_total); NaN when its metrics cannot be read or do not count them.
func (s *scaleRun) partitionWatchBytes(ctx context.Context) float64 {
	samples, err := s.operatorSamples(ctx)
	if err != nil {
		return math.NaN()
	}
	return partitionWatchBytesFrom(samples)
}

func partitionWatchBytesFrom(samples metricSamples) float64 {
	const series = `sharestate_operator_watch_bytes_total{resource="sharepartitionstates"}`
	for _, line := range samples {
		if value, ok := strings.CutPrefix(line, series+" "); ok {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				return v
			}
		}
	}
	return math.NaN()
}

// operatorRequests reads what the operator has sent the API server so far (client-go's metrics, all
// hosts and codes): requests by method (a method never used is absent), and the seconds its PATCHes
// took from sending to the answer; nil when its metrics cannot be read.
func (s *scaleRun) operatorRequests(ctx context.Context) *requestCounts {
	samples, err := s.operatorSamples(ctx)
	if err != nil {
		return nil
	}
	counts := &requestCounts{byMethod: map[string]float64{}}
	for _, method := range []string{http.MethodGet, http.MethodPatch, http.MethodPost, http.MethodPut} {
		if n := samples.sum("rest_client_requests_total", `method="`+method+`"`); !math.IsNaN(n) {
			counts.byMethod[method] = n
		}
	}
	if secs := samples.sum("rest_client_request_duration_seconds_sum", `verb="PATCH"`); !math.IsNaN(secs) {
		counts.patchSeconds = secs
	}
	return counts
}

// requestCounts are the operator's API requests so far.
type requestCounts struct {
	byMethod     map[string]float64
	patchSeconds float64
}

// metricSamples are the sample lines of a Prometheus text exposition.
type metricSamples []string

// sum adds up the samples of the metric name whose labels contain label ("" for any); NaN when
// there is none.
func (m metricSamples) sum(name, label string) float64 { return m.sumWith(name, label) }

// sumWith adds up the samples of the metric name whose labels contain every one of labels; NaN when
// there is none.
func (m metricSamples) sumWith(name string, labels ...string) float64 {
	total, matched := 0.0, 0
	for _, line := range m {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue // another metric whose name starts with this one
		}
		have, value, found := strings.Cut(rest, " ")
		if !found || !containsAll(have, labels) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			total, matched = total+v, matched+1
		}
	}
	if matched == 0 {
		return math.NaN()
	}
	return total
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// operatorSamples reads the operator's metrics.
func (s *scaleRun) operatorSamples(ctx context.Context) (metricSamples, error) {
	return scrape(ctx, s.operatorMetrics)
}

// scrape reads the metrics served in plain HTTP at addr.
func scrape(ctx context.Context, addr string) (metricSamples, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseSamples(string(body)), nil
}

// parseSamples returns the sample lines of a Prometheus text exposition.
func parseSamples(body string) metricSamples {
	var samples metricSamples
	for _, line := range strings.Split(body, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			samples = append(samples, line)
		}
	}
	return samples
}

// line is one level's summary, as `make bench` prints it.
func (r *scaleResult) line(l scaleLevel) string {
	fence, raw := "-", "-"
	if l.load == scaleLoads[0] {
		fence, raw = fmt.Sprintf("%.3f", r.fence.Seconds()), fmt.Sprintf("%.3f", r.raw.Seconds())
	}
	watchBytes := "-"
	if !math.IsNaN(l.partitionWatchBytesPerWrite) {
		watchBytes = fmt.Sprintf("%.1f", l.partitionWatchBytesPerWrite)
	}
	line := fmt.Sprintf("scenario=scale-%d load=%.1f offered_per_s=%.1f achieved_per_s=%.1f p50_ms=%.2f p99_ms=%.2f "+
		"operator_cpu_ms_per_write=%.4f operator_cores=%.4f operator_idle_cores=%.4f operator_partition_watch_bytes_per_write=%s "+
		"operator_rss_mb=%.1f operator_heap_mb=%.1f sidecar_rss_mb=%.1f apiserver_cpu_ms_per_write=%.3f "+
		"fence_1000_s=%s raw_1000_s=%s fenced=%d capacity_per_s=%.1f lone_p50_ms=%.2f others_cores=%.2f",
		r.partitions, l.load, l.run.offeredPerSecond, l.run.achievedPerSecond,
		millis(percentile(l.run.latencies, 0.5)), millis(percentile(l.run.latencies, 0.99)),
		l.operatorMillisPerWrite, l.operatorCores, r.operatorIdleCores, watchBytes, l.operatorRSS, l.operatorHeap, l.sidecarRSS,
		l.apiserverMillisPerWrite, fence, raw, r.fenced, r.capacityPerSecond, millis(r.lonePercentile50), l.othersCores)
	if l.run.failed > 0 || l.run.unfinished > 0 {
		line += fmt.Sprintf(" failed_writes=%d unfinished_writes=%d", l.run.failed, l.run.unfinished)
	}
	if len(r.apiserverEnv) > 0 {
		line += " apiserver_env=" + strings.Join(r.apiserverEnv, ",")
	}
	return line
}

// slowWriteThreshold is, in p50s of a lone write, the latency above which the progress log lists a
// write as slow. It is no target: on a machine whose cores the load generator, kube-apiserver, etcd,
// the operator and the sidecars share, the p99 measures the machine (docs/performance.md).
const slowWriteThreshold = 4

// Targets of the operator at scale: its CPU per write against kube-apiserver's at the busiest level,
// its CPU there against its CPU with no writes, its memory per partition, and the fence against its
// raw baseline.
const (
	operatorCPUShareTarget    = 0.01
	operatorBusyOverIdle      = 1.5
	operatorRSSBaseMB         = 64
	operatorRSSPerPartitionKB = 1
	fenceOverRawTarget        = 1.34
)

// verdicts checks the targets on one size's measurement.
func (r *scaleResult) verdicts() string {
	half, busy := r.levels[0], r.levels[len(r.levels)-1]
	cpuRatio := busy.operatorMillisPerWrite / busy.apiserverMillisPerWrite
	busyOverIdle := busy.operatorCores / r.operatorIdleCores
	rssBound := operatorRSSBaseMB + operatorRSSPerPartitionKB*float64(r.partitions)/1024
	sidecarBound := r.sidecarCacheBoundMB + 64
	latencyRatio := millis(percentile(half.run.latencies, 0.99)) / millis(r.lonePercentile50)
	achieved := busy.run.achievedPerSecond / busy.run.offeredPerSecond
	fenceRatio := r.fence.Seconds() / r.raw.Seconds()
	checks := []string{
		fmt.Sprintf("operator/apiserver CPU per write at %.0f%% %.4f (target <= %.2f): %s", 100*busy.load, cpuRatio, operatorCPUShareTarget, verdict(cpuRatio <= operatorCPUShareTarget)),
		fmt.Sprintf("operator CPU at %.0f%% / with no writes %.2f (target <= %.1f): %s", 100*busy.load, busyOverIdle, operatorBusyOverIdle, verdict(busyOverIdle <= operatorBusyOverIdle)),
		fmt.Sprintf("operator partition watch bytes per write at %.0f%% %.1f (target 0): %s", 100*busy.load, busy.partitionWatchBytesPerWrite, verdict(busy.partitionWatchBytesPerWrite == 0)),
		fmt.Sprintf("operator RSS %.1f MB (target <= %.1f): %s", r.operatorRSS, rssBound, verdict(r.operatorRSS <= rssBound)),
		fmt.Sprintf("sidecar RSS %.1f MB (target <= %.0f): %s", r.sidecarRSS, sidecarBound, verdict(r.sidecarRSS <= sidecarBound)),
		fmt.Sprintf("achieved/offered at %.0f%% %.3f (target >= 0.98): %s", 100*busy.load, achieved, verdict(achieved >= 0.98)),
		fmt.Sprintf("fence/raw of %d partitions %.2f (target <= %.2f): %s", r.fenced, fenceRatio, fenceOverRawTarget, verdict(fenceRatio <= fenceOverRawTarget)),
		fmt.Sprintf("p99 at %.0f%% / lone p50 %.2f: INFO", 100*half.load, latencyRatio),
	}
	if len(r.apiserverEnv) > 0 {
		return fmt.Sprintf("scale-%d (diagnostic, kube-apiserver with %s; not the issue's targets): %s",
			r.partitions, strings.Join(r.apiserverEnv, " "), strings.Join(checks, "; "))
	}
	return fmt.Sprintf("scale-%d: %s", r.partitions, strings.Join(checks, "; "))
}
