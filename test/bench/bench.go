package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// Config says what to run and how to report it.
type Config struct {
	// Warmup is how long the writers run before the measured window opens.
	Warmup time.Duration
	// Duration is the measured window of each scenario.
	Duration time.Duration
	// Rounds is how many times each scenario is measured (at least once); the rounds go round robin
	// over the scenarios and the result of a scenario merges its windows. On a noisy machine a slow
	// spell then spreads over all the scenarios instead of spoiling one of them.
	Rounds int
	// Scenarios are the names of the scenarios to run, in that order (so that a comparison can be run
	// both ways round); empty runs all, in the order of ScenarioNames.
	Scenarios []string
	// JSON prints the report as one JSON document instead of the lines and tables.
	JSON bool
	// ProfileDir, when set, receives CPU profiles of each scenario's window, of this process and of
	// kube-apiserver.
	ProfileDir string
	// FencePartitions, above zero, adds the fence scenario on the same control plane: one broker pod
	// leads this many partitions, its deletion is timed until the operator has fenced them all, against
	// raw parallel status updates of the same objects with FenceWorkers workers.
	FencePartitions int
	// FenceWorkers is the operator's fencing workers in that scenario (and the baseline's).
	FenceWorkers int
	// ScaleSizes are the partition counts of the scale scenarios, which run only when Scenarios names
	// ScaleScenario (default DefaultScaleSizes).
	ScaleSizes []int
	// ScaleAPIServerEnv, NAME=value each, is added to the environment of the scale scenarios'
	// kube-apiserver. It is for diagnostics, such as GOGC=off with a GOMEMLIMIT, which holds its
	// garbage collector off to measure the write path without its collections; the scale lines
	// then name it, and their targets are not the issue's.
	ScaleAPIServerEnv []string
	// Kafka shapes the kafka family (KafkaScenario), which runs only when Scenarios names it.
	Kafka KafkaConfig
}

// Report is a whole run: its results and the targets checked against them.
type Report struct {
	Date            time.Time `json:"date"`
	GoVersion       string    `json:"goVersion"`
	CPUs            int       `json:"cpus"`
	WarmupSeconds   float64   `json:"warmupSeconds"`
	DurationSeconds float64   `json:"durationSeconds"`
	Rounds          int       `json:"rounds"`
	Results         []Result  `json:"results"`
	Checks          []Check   `json:"checks"`
}

// Run starts one control plane, runs the selected scenarios one after another (each in a namespace of
// its own) and prints the report to out, progress to log. It returns an error when the control plane
// cannot start, a scenario could not be measured or a write failed; a missed target is a measurement,
// not an error.
func Run(ctx context.Context, cfg Config, out, log io.Writer) error {
	selected, err := cfg.selected()
	if err != nil {
		return err
	}
	if cfg.ProfileDir != "" {
		// Made before anything is measured: a profile that cannot be written is found out at once,
		// not after a scenario's minutes of set-up.
		if err := os.MkdirAll(cfg.ProfileDir, 0o755); err != nil {
			return fmt.Errorf("-profile-dir: %w", err)
		}
	}
	ran, err := runOwnControlPlanes(ctx, cfg, out, log)
	if err != nil {
		return err
	}
	if ran && len(selected) == 0 && !cfg.runsValidationCost() {
		return ctx.Err()
	}
	fmt.Fprintln(log, "bench: starting a control plane (kube-apiserver and etcd)")
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(log, "bench: stopping the control plane:", err)
		}
	}()

	r := &runner{env: env, cfg: cfg, cpu: newCPUProbe(), log: log}
	if cfg.ProfileDir != "" {
		r.profiler = &profiler{dir: cfg.ProfileDir, config: env.Config}
	}
	report := Report{
		Date: time.Now().UTC().Truncate(time.Second), GoVersion: runtime.Version(), CPUs: runtime.NumCPU(),
		WarmupSeconds: cfg.Warmup.Seconds(), DurationSeconds: cfg.Duration.Seconds(), Rounds: cfg.rounds(),
	}
	if len(selected) > 0 {
		report.Results = r.runAll(ctx, selected, out)
		report.Checks = evaluate(report.Results)
		if err := writeReport(out, report, cfg.JSON); err != nil {
			return err
		}
	}
	if cfg.FencePartitions > 0 {
		if err := runFence(ctx, env, cfg, out, log); err != nil {
			return err
		}
	}
	if cfg.runsValidationCost() {
		if err := runValidationCost(ctx, env, out, log); err != nil {
			return err
		}
	}
	var failed []string
	for _, res := range report.Results {
		if !res.OK() {
			failed = append(failed, res.Scenario)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("failed scenarios: %s", strings.Join(failed, ", "))
	}
	return ctx.Err()
}

// runOwnControlPlanes runs the families named in cfg that start control planes of their own: the
// scale scenarios (one per size), and the kafka family (a control plane and Kafka clusters). It
// reports whether it ran any.
func runOwnControlPlanes(ctx context.Context, cfg Config, out, log io.Writer) (bool, error) {
	ran := false
	if slices.Contains(cfg.Scenarios, ScaleScenario) {
		ran = true
		if err := runScale(ctx, cfg, out, log); err != nil {
			return ran, err
		}
	}
	if slices.Contains(cfg.Scenarios, KafkaScenario) {
		ran = true
		if err := runKafka(ctx, cfg, out, log); err != nil {
			return ran, err
		}
	}
	return ran, nil
}

// runAll runs the rounds, printing each scenario's line to out when its last round is done (or it
// failed), and returns the results of the scenarios that started.
func (r *runner) runAll(ctx context.Context, selected []scenario, out io.Writer) []Result {
	trials := make([]*trial, len(selected))
	for i, sc := range selected {
		trials[i] = &trial{scenario: sc}
	}
	rounds := r.cfg.rounds()
	for round := range rounds {
		for _, tr := range trials {
			if tr.err != nil || ctx.Err() != nil {
				continue
			}
			fmt.Fprintf(r.log, "bench: %s: round %d of %d: %s warm-up, then %s measured\n",
				tr.name, round+1, rounds, r.cfg.Warmup, r.cfg.Duration)
			r.runRound(ctx, tr, round)
			if (tr.err != nil || round == rounds-1) && !r.cfg.JSON {
				fmt.Fprintln(out, tr.result(r.cpu).Line())
			}
		}
	}
	var results []Result
	for _, tr := range trials {
		if tr.writers != nil || tr.err != nil {
			results = append(results, tr.result(r.cpu))
		}
	}
	return results
}

func (cfg Config) rounds() int { return max(cfg.Rounds, 1) }

// runsValidationCost says whether the run includes the validation-cost scenario: with every scenario,
// or when named.
func (cfg Config) runsValidationCost() bool {
	return len(cfg.Scenarios) == 0 || slices.Contains(cfg.Scenarios, ValidationCostScenario)
}

func (cfg Config) selected() ([]scenario, error) {
	if cfg.Duration <= 0 || cfg.Warmup < 0 {
		return nil, fmt.Errorf("duration %s must be positive and warm-up %s not negative", cfg.Duration, cfg.Warmup)
	}
	if err := testenv.CheckAPIServerEnv(cfg.ScaleAPIServerEnv); err != nil {
		return nil, err
	}
	for _, f := range cfg.Kafka.Families {
		if !slices.Contains(KafkaFamilies, f) {
			return nil, fmt.Errorf("unknown kafka family %q; they are %s", f, strings.Join(KafkaFamilies, ", "))
		}
	}
	if len(cfg.Scenarios) == 0 {
		return scenarios, nil
	}
	var out []scenario
	for _, name := range cfg.Scenarios {
		if name == ScaleScenario || name == ValidationCostScenario || name == KafkaScenario {
			continue // run by runScale, runValidationCost, runKafka
		}
		i := slices.IndexFunc(scenarios, func(sc scenario) bool { return sc.name == name })
		switch {
		case i < 0:
			return nil, fmt.Errorf("unknown scenario %q; the scenarios are %s", name, strings.Join(ScenarioNames(), ", "))
		case slices.ContainsFunc(out, func(sc scenario) bool { return sc.name == name }):
			return nil, fmt.Errorf("scenario %q is named twice", name)
		}
		out = append(out, scenarios[i])
	}
	return out, nil
}

func writeReport(out io.Writer, report Report, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	fmt.Fprintf(out, "\nMeasured %s on %d CPUs with %s; per scenario %d round(s) of %gs warm-up and %gs measured.\n",
		report.Date.Format(time.DateOnly), report.CPUs, report.GoVersion, report.Rounds, report.WarmupSeconds, report.DurationSeconds)
	writeTables(out, report.Results, report.Checks)
	return nil
}
