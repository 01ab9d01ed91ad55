// Command run-local runs the system for a developer (`make run`): on the cluster that --kubeconfig or
// KUBECONFIG names, or else on a local control plane whose data is kept in --run-dir. It installs the
// CRDs, runs the operator, a sidecar for a stand-in broker pod, and a stand-in broker that writes
// share state for the sample group through that sidecar, all in this process; prints how to reach
// the cluster; and runs until interrupted. One run at a time holds the run directory.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/internal/sidecar"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/localcluster"
)

// config is what the flags set.
type config struct {
	cluster  localcluster.Options
	operator operator.Options
	sidecar  sidecar.Config
	standIn  localcluster.StandInOptions
}

func main() {
	cfg, zapOpts := parseFlags(os.Args[1:])
	ctrl.SetLogger(renamed(zap.New(zap.UseFlagOptions(zapOpts))))
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, *zap.Options) {
	var c config
	// A flag set of our own: controller-runtime registers its own --kubeconfig on the global one.
	flags := flag.NewFlagSet("run-local", flag.ExitOnError)
	flags.StringVar(&c.cluster.RunDir, "run-dir", ".run", "directory for the local control plane's data and kubeconfig, held by one run at a time")
	flags.StringVar(&c.cluster.CRDDir, "crd-dir", "config/crd/bases", "directory of the CRD manifests to install")
	flags.StringVar(&c.cluster.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"kubeconfig of an existing cluster to run against (default $KUBECONFIG); empty starts a local control plane")
	flags.StringVar(&c.operator.MetricsBindAddress, "metrics-bind-address", "127.0.0.1:8080", "the operator's metrics address (plain HTTP here); 0 disables it")
	flags.StringVar(&c.operator.HealthProbeBindAddress, "health-probe-bind-address", "127.0.0.1:8081", "the operator's health probe address; 0 disables it")
	flags.DurationVar(&c.operator.NotReadyGrace, "fence-not-ready-after", 0, "also fence a leader whose pod has not been Ready for this long")
	flags.StringVar(&c.sidecar.ListenAddress, "sidecar-listen-address", kafkawire.DefaultAddress, "where the local sidecar serves Kafka's protocol; empty runs no sidecar (and no stand-in broker)")
	flags.StringVar(&c.sidecar.HealthProbeBindAddress, "sidecar-health-probe-bind-address", "127.0.0.1:9095", "the local sidecar's /healthz and /readyz; 0 disables them")
	flags.StringVar(&c.standIn.GroupID, "stand-in-group", "orders-processors", "the share group whose partitions the stand-in broker initializes and leads, once a ShareGroup of it exists; empty runs none")
	partitions := flags.Int("stand-in-partitions", 4, "how many partitions of the group's first topic the stand-in broker leads, from 0")
	flags.DurationVar(&c.standIn.Interval, "stand-in-interval", 0, "time between the stand-in consumer's rounds (default 2s)")
	// Info, not development's debug: envtest's debug lines ("adding API in waitlist") tell a user of
	// make run nothing. --zap-log-level=debug shows them.
	zapOpts := &zap.Options{Development: true, Level: zapcore.InfoLevel}
	zapOpts.BindFlags(flags)
	_ = flags.Parse(args) // ExitOnError: Parse exits on a bad flag
	if *partitions < 1 || *partitions > math.MaxInt32 {
		fmt.Fprintln(os.Stderr, "run-local: --stand-in-partitions must be at least 1")
		os.Exit(2)
	}
	c.standIn.Partitions = int32(*partitions)
	c.cluster.KubeconfigSource = "--kubeconfig"
	if !isSet(flags, "kubeconfig") {
		c.cluster.KubeconfigSource = "$KUBECONFIG"
	}
	return c, zapOpts
}

func isSet(flags *flag.FlagSet, name string) (set bool) {
	flags.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func run(cfg config) error {
	giveBack := localcluster.TakeTerminal()
	defer giveBack()
	// Before the start, so that Ctrl-C or SIGTERM stops it in any phase (StartContext honours it).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.cluster.Logger = ctrl.Log.WithName("local-control-plane")
	cluster, err := localcluster.StartContext(ctx, cfg.cluster)
	if err != nil {
		if ctx.Err() != nil {
			fmt.Println("sharestate: stopped before the control plane was up")
			return nil
		}
		return err
	}
	err = runSystem(ctx, cluster, cfg)
	// A fresh context: the signal context is already done, and stopping must still finish.
	if stopErr := cluster.Stop(context.Background()); stopErr != nil && err == nil {
		err = fmt.Errorf("stopping: %w", stopErr)
	}
	if err == nil {
		fmt.Println("sharestate: stopped")
	}
	return err
}
