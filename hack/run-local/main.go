// Command run-local runs the system for a developer (`make run`): on the cluster that --kubeconfig or
// KUBECONFIG names, or else on a local control plane whose data is kept in --run-dir. It installs the
// CRDs, runs the operator in this process, prints how to reach the cluster, and runs until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/internal/sidecar"
	"github.com/sharestate/sharestate-operator/test/localcluster"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

func main() {
	opts := localcluster.Options{}
	var op operator.Options
	var sc sidecar.Config
	// A flag set of our own: controller-runtime registers its own --kubeconfig on the global one.
	flags := flag.NewFlagSet("run-local", flag.ExitOnError)
	flags.StringVar(&opts.RunDir, "run-dir", ".run", "directory for the local control plane's data and kubeconfig")
	flags.StringVar(&opts.CRDDir, "crd-dir", "config/crd/bases", "directory of the CRD manifests to install")
	flags.StringVar(&opts.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"kubeconfig of an existing cluster to run against (default $KUBECONFIG); empty starts a local control plane")
	flags.StringVar(&op.MetricsBindAddress, "metrics-bind-address", "127.0.0.1:8080", "the operator's metrics address (plain HTTP here); 0 disables it")
	flags.StringVar(&op.HealthProbeBindAddress, "health-probe-bind-address", "127.0.0.1:8081", "the operator's health probe address; 0 disables it")
	flags.DurationVar(&op.NotReadyGrace, "fence-not-ready-after", 0, "also fence a leader whose pod has not been Ready for this long")
	flags.StringVar(&sc.ListenAddress, "sidecar-listen-address", kafkawire.DefaultAddress, "where the local sidecar serves Kafka's protocol; empty runs no sidecar")
	flags.StringVar(&sc.HealthProbeBindAddress, "sidecar-health-probe-bind-address", "127.0.0.1:9095", "the local sidecar's /healthz and /readyz; 0 disables them")
	zapOpts := zap.Options{Development: true}
	zapOpts.BindFlags(flags)
	_ = flags.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	if err := run(opts, op, sc); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func run(opts localcluster.Options, op operator.Options, sc sidecar.Config) error {
	giveBack := localcluster.TakeTerminal()
	defer giveBack()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	cluster, err := localcluster.Start(opts)
	if err != nil {
		return err
	}
	where := "the cluster of " + cluster.KubeconfigPath
	if cluster.Local {
		where = "a local control plane (data in " + opts.RunDir + ")"
	}
	mgr, err := operator.NewManager(ctx, cluster.Config, op)
	if err != nil {
		_ = cluster.Stop(context.Background())
		return err
	}
	operatorDone := make(chan error, 1)
	go func() { operatorDone <- mgr.Start(ctx) }()

	sidecarDone := make(chan error, 1)
	if sc.ListenAddress != "" {
		if err := startLocalSidecar(ctx, cluster, sc, sidecarDone); err != nil {
			stop()
			if opErr := <-operatorDone; opErr != nil {
				fmt.Fprintln(os.Stderr, "sharestate: the operator stopped with an error:", opErr)
			}
			_ = cluster.Stop(context.Background())
			return err
		}
	} else {
		sidecarDone <- nil
	}

	fmt.Printf("sharestate: running on %s; CRDs installed; operator started (metrics http://%s/metrics).\n", where, op.MetricsBindAddress)
	if sc.ListenAddress != "" {
		fmt.Printf("A sidecar for broker 0 (pod default/%s) serves the share-state RPCs (Kafka API keys 83-87) on %s.\n", localBrokerPod, sc.ListenAddress)
	}
	fmt.Printf("Try:\n  export KUBECONFIG=%s\n  kubectl apply -f config/samples/sharestate_v1alpha1_sharegroup.yaml\n  kubectl get sharegroups,sharepartitionstates -A\n", cluster.KubeconfigPath)
	fmt.Println("  go build -o bin/kubectl-sharestate ./cmd/kubectl-sharestate && PATH=$PWD/bin:$PATH kubectl sharestate describe group orders")
	fmt.Println("Press Ctrl-C to stop.")

	<-ctx.Done()
	fmt.Println("sharestate: stopping")
	if err := <-operatorDone; err != nil {
		fmt.Fprintln(os.Stderr, "sharestate: the operator stopped with an error:", err)
	}
	if err := <-sidecarDone; err != nil {
		fmt.Fprintln(os.Stderr, "sharestate: the sidecar stopped with an error:", err)
	}
	// A fresh context: the signal context is already done, and stopping must still finish.
	if err := cluster.Stop(context.Background()); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	fmt.Println("sharestate: stopped")
	return nil
}

// localBrokerPod names the Pod object that stands for the local sidecar's broker: the operator fences
// partitions whose leader's pod is gone, so the sidecar's leader records need a pod to point at.
const localBrokerPod = "local-broker-0"

// startLocalSidecar creates (or finds) the local broker's Pod object and runs a sidecar for it in this
// process, sending its end to done.
func startLocalSidecar(ctx context.Context, cluster *localcluster.Cluster, sc sidecar.Config, done chan<- error) error {
	pod, err := cluster.EnsurePod(ctx, "default", localBrokerPod)
	if err != nil {
		return err
	}
	sc.Namespace, sc.MetricsBindAddress = "default", "0" // its metrics are the operator's registry's, served above
	sc.ShutdownTimeout = 10 * time.Second
	sc.Identity = persister.Identity{BrokerID: 0, PodName: pod.Name, PodUID: string(pod.UID)}
	sc.Logger = ctrl.Log.WithName("sidecar")
	go func() { done <- sidecar.Run(ctx, cluster.Config, sc) }()
	return nil
}
