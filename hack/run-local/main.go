// Command run-local runs the system for a developer (`make run`): on the cluster that --kubeconfig or
// KUBECONFIG names, or else on a local control plane whose data is kept in --run-dir. It installs the
// CRDs, prints how to reach the cluster, and runs until interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sharestate/sharestate-operator/internal/localcluster"
)

func main() {
	opts := localcluster.Options{}
	// A flag set of our own: controller-runtime registers its own --kubeconfig on the global one.
	flags := flag.NewFlagSet("run-local", flag.ExitOnError)
	flags.StringVar(&opts.RunDir, "run-dir", ".run", "directory for the local control plane's data and kubeconfig")
	flags.StringVar(&opts.CRDDir, "crd-dir", "config/crd/bases", "directory of the CRD manifests to install")
	flags.StringVar(&opts.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"),
		"kubeconfig of an existing cluster to run against (default $KUBECONFIG); empty starts a local control plane")
	_ = flags.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag

	if err := run(opts); err != nil {
		fmt.Fprintln(os.Stderr, "run-local:", err)
		os.Exit(1)
	}
}

func run(opts localcluster.Options) error {
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
	fmt.Printf("sharestate: running on %s; CRDs installed.\n", where)
	fmt.Printf("Try:\n  export KUBECONFIG=%s\n  kubectl get sharegroups,sharepartitionstates -A\n", cluster.KubeconfigPath)
	fmt.Println("Press Ctrl-C to stop.")

	<-ctx.Done()
	fmt.Println("sharestate: stopping")
	// A fresh context: the signal context is already done, and stopping must still finish.
	if err := cluster.Stop(context.Background()); err != nil {
		return fmt.Errorf("stopping: %w", err)
	}
	fmt.Println("sharestate: stopped")
	return nil
}
