package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// requestTimeout bounds every API request of the scenarios' clients, so that a stuck request ends a
// run instead of hanging it.
const requestTimeout = 30 * time.Second

// runner runs scenarios on one control plane.
type runner struct {
	env      *testenv.Env
	cfg      Config
	cpu      cpuProbe
	profiler *profiler
	log      io.Writer
}

// trial is a scenario being measured: its writers, set up on its first round, and what its windows
// measured so far.
type trial struct {
	scenario
	counter *requestCounter
	writers []writeFunc

	total    load      // the windows' writes, merged
	requests int64     // API requests in the windows
	cpu      []float64 // CPU seconds of each process in the windows; nil when not measured
	cpuLost  bool      // a process could not be read in some window
	err      error     // why the scenario cannot be measured (further)
}

// sample is what the probes read when a window opens and when it closes.
type sample struct {
	requests int64
	cpu      []float64
}

// runRound runs one round of the trial: its setup if this is the first, a warm-up and a window.
func (r *runner) runRound(ctx context.Context, tr *trial, round int) {
	if tr.writers == nil {
		if tr.err = r.setup(ctx, tr); tr.err != nil {
			r.reportPanic(tr.name, tr.err)
			return
		}
	}
	var before, after sample
	var profileErr error
	mark := func(end bool) {
		s := sample{requests: tr.counter.load(), cpu: r.cpu.sample()}
		if end {
			after = s
			return
		}
		before = s
		if r.profiler != nil {
			profileErr = r.profiler.start(ctx, profileName(tr.name, round, r.cfg.rounds()), r.cfg.Duration)
		}
	}
	l, err := measure(ctx, tr.writers, window{warmup: r.cfg.Warmup, duration: r.cfg.Duration}, mark)
	if r.profiler != nil {
		if profileErr = errors.Join(profileErr, r.profiler.stop()); profileErr != nil {
			fmt.Fprintf(r.log, "bench: %s: profiling: %v\n", tr.name, profileErr)
		}
	}
	if err != nil {
		r.reportPanic(tr.name, err)
		tr.err = err
		return
	}
	tr.add(l, before, after)
}

// setup creates the trial's namespace and client and sets up its scenario.
func (r *runner) setup(ctx context.Context, tr *trial) error {
	tr.counter = &requestCounter{}
	c, err := r.countedClient(tr.counter)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + tr.name + "-"}}
	if err := r.env.Client.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating a namespace: %w", err)
	}
	err = protect(ctx, func(ctx context.Context) (err error) {
		tr.writers, err = tr.setup(ctx, c, ns.Name)
		return err
	})
	if err != nil {
		return fmt.Errorf("setup: %w", err)
	}
	return nil
}

// countedClient returns a client whose requests counter counts, without client-side throttling.
func (r *runner) countedClient(counter *requestCounter) (client.Client, error) {
	cfg := rest.CopyConfig(r.env.Config)
	cfg.QPS, cfg.Burst = -1, -1
	cfg.Timeout = requestTimeout
	cfg.Wrap(counter.wrap)
	return client.New(cfg, client.Options{Scheme: r.env.Scheme})
}

// reportPanic prints where a panic of the code under test happened; the result only carries its value.
func (r *runner) reportPanic(scenario string, err error) {
	if p := (*panicError)(nil); errors.As(err, &p) {
		fmt.Fprintf(r.log, "bench: %s: %v\n%s\n", scenario, p, p.stack)
	}
}

func profileName(scenario string, round, rounds int) string {
	if rounds == 1 {
		return scenario
	}
	return fmt.Sprintf("%s-%d", scenario, round+1)
}

// add merges one window's measurement into the trial's.
func (tr *trial) add(l load, before, after sample) {
	tr.total.elapsed += l.elapsed
	tr.total.latencies = append(tr.total.latencies, l.latencies...)
	tr.total.failed += l.failed
	if tr.total.firstErr == nil {
		tr.total.firstErr = l.firstErr
	}
	tr.requests += after.requests - before.requests
	if len(before.cpu) != len(after.cpu) {
		tr.cpuLost = true
		return
	}
	if tr.cpu == nil {
		tr.cpu = make([]float64, len(before.cpu))
	}
	for i := range before.cpu {
		used := after.cpu[i] - before.cpu[i]
		if math.IsNaN(used) || used < 0 { // the process could not be read
			tr.cpuLost = true
		}
		tr.cpu[i] += used
	}
}

// result is the trial's measurement so far.
func (tr *trial) result(probe cpuProbe) Result {
	if tr.err != nil && tr.total.elapsed == 0 {
		return Result{Scenario: tr.name, Writers: len(tr.writers), Error: tr.err.Error()}
	}
	l := tr.total
	l.latencies = append([]time.Duration(nil), l.latencies...)
	slices.Sort(l.latencies)
	var cpu []ProcessCPU
	if !tr.cpuLost {
		cpu = probe.share(tr.cpu, l.elapsed)
	}
	res := newResult(tr.name, len(tr.writers), l, tr.requests, cpu)
	if tr.err != nil && res.Error == "" {
		res.Error = tr.err.Error()
	}
	return res
}
