// Command bench measures share-state write throughput against one local control plane (`make bench`):
// see docs/performance.md. Its logic lives in test/bench.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/test/bench"
)

func main() {
	var cfg bench.Config
	var scenarios string
	flags := flag.NewFlagSet("bench", flag.ExitOnError)
	flags.DurationVar(&cfg.Duration, "duration", 5*time.Second, "measured window of each scenario")
	flags.DurationVar(&cfg.Warmup, "warmup", time.Second, "unmeasured warm-up before each scenario's window")
	flags.StringVar(&scenarios, "scenarios", "",
		"comma-separated scenarios to run, in that order (default all): "+strings.Join(bench.ScenarioNames(), ",")+
			"; "+bench.ValidationCostScenario+" (run last) measures what the schema's validation rules cost kube-apiserver per write"+
			"; "+bench.ScaleScenario+" (run first, and only when named) adds the scale scenarios"+
			"; "+bench.KafkaScenario+" (only when named) measures real Kafka brokers with Kafka's own persister and with ours")
	flags.IntVar(&cfg.Rounds, "rounds", 1, "measure each scenario this many times, round robin over the scenarios, and merge the windows")
	flags.BoolVar(&cfg.JSON, "json", false, "print the report as JSON instead of lines and tables")
	flags.StringVar(&cfg.ProfileDir, "profile-dir", "",
		"write CPU profiles of each scenario's window (this process and kube-apiserver) into this directory")
	flags.IntVar(&cfg.FencePartitions, "fence-partitions", 1000,
		"partitions of the fence scenario (one broker pod leads them all; its deletion is timed); 0 skips it")
	flags.IntVar(&cfg.FenceWorkers, "fence-workers", operator.DefaultMaxConcurrentReconciles, "the operator's fencing workers in the fence scenario")
	flags.Func("scale-sizes", fmt.Sprintf("partition counts of the %q scenarios, comma-separated (default %v)", bench.ScaleScenario, bench.DefaultScaleSizes),
		func(v string) (err error) { cfg.ScaleSizes, err = bench.ParseScaleSizes(v); return err })
	flags.Func("scale-apiserver-env", "NAME=value pairs, comma-separated, added to the environment of the scale scenarios' kube-apiserver, "+
		"for diagnostics: 'GOGC=off,GOMEMLIMIT=8GiB' measures the write path without its garbage collections",
		func(v string) error { cfg.ScaleAPIServerEnv = strings.Split(v, ","); return nil })
	flags.IntVar(&cfg.Kafka.Records, "kafka-records", 400000, "records each share-consumption cell of the kafka family produces and consumes")
	flags.IntVar(&cfg.Kafka.Trials, "kafka-trials", 3, "leader losses the kafka family times per persister")
	flags.Func("kafka-sidecar-args", "flags added to every sidecar of the kafka family, comma-separated (e.g. --kube-api-qps=0)",
		func(v string) error { cfg.Kafka.SidecarArgs = strings.Split(v, ","); return nil })
	flags.Func("kafka-share-cells", "cells of the kafka family's share part, PARTITIONSxCONSUMERS comma-separated (default 3x1,3x4,100x1,100x4)",
		func(v string) (err error) { cfg.Kafka.ShareCells, err = bench.ParseShareCells(v); return err })
	flags.IntVar(&cfg.Kafka.ShareTrials, "kafka-share-trials", 3, "times each share cell of the kafka family is measured per persister (the ratios are of the medians)")
	flags.Func("kafka-control-plane-cpus", "CPUs, comma-separated, to keep the kafka family's kube-apiserver and etcd on, everything else on the others "+
		"(a production control plane has machines of its own); default: all share every CPU",
		func(v string) (err error) { cfg.Kafka.ControlPlaneCPUs, err = bench.ParseCPUList(v); return err })
	flags.Func("kafka-families", "parts of the kafka family to run, comma-separated (default all): "+strings.Join(bench.KafkaFamilies, ","),
		func(v string) error { cfg.Kafka.Families = strings.Split(v, ","); return nil })
	_ = flags.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag
	if scenarios != "" {
		cfg.Scenarios = strings.Split(scenarios, ",")
	}
	// controller-runtime's client logs API warnings through its global logger, which complains when it
	// was never set; a bench prints measurements, not logs.
	ctrllog.SetLogger(ctrllog.Log.WithSink(ctrllog.NullLogSink{}))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := bench.Run(ctx, cfg, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
