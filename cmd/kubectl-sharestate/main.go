// Command kubectl-sharestate is the kubectl plugin of sharestate-operator: `kubectl sharestate list`,
// `describe group`, `reset-offsets`, `delete group`, `dump` and `version`. Put it on the PATH and
// kubectl finds it; --help lists the commands and flags. The commands live in internal/plugin.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/sharestate/sharestate-operator/internal/kubeconfig"
	"github.com/sharestate/sharestate-operator/internal/plugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	err := plugin.NewCommand(genericclioptions.NewConfigFlags(true), streams).ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", plugin.ErrorLine(kubeconfig.Explain(err)))
		os.Exit(1)
	}
}
