// Command sharestate-sidecar runs beside a Kafka broker and serves the share-state persister's five
// operations (InitializeShareGroupState, ReadShareGroupState, WriteShareGroupState,
// DeleteShareGroupState, ReadShareGroupStateSummary) over Kafka's wire protocol, storing the state
// in SharePartitionState resources of the pod's namespace. --help lists the flags.
package main

import (
	"flag"
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharestate/sharestate-operator/internal/kubeconfig"
	"github.com/sharestate/sharestate-operator/internal/sidecar"
)

func main() {
	f := bindFlags(flag.CommandLine)
	flag.Parse() // controller-runtime's --kubeconfig is registered on the same flag set
	if err := validateFlags(f); err != nil {
		// One line per problem, no stack trace; exit status 2, as the flag package's for a bad flag.
		fmt.Fprintln(os.Stderr, "sharestate-sidecar: invalid flags:\n"+err.Error())
		os.Exit(2)
	}
	log := zap.New(zap.UseFlagOptions(&f.zap))
	ctrl.SetLogger(log)
	f.Logger = log

	ctx := ctrl.SetupSignalHandler()
	restCfg, err := kubeconfig.Load() // --kubeconfig, $KUBECONFIG, in-cluster, ~/.kube/config
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharestate-sidecar:", err) // one line, not a logged stack trace
		os.Exit(1)
	}
	if f.Identity.PodUID == "" {
		log.Info("No pod UID (--pod-uid or POD_UID): a replacement pod of the same name will not be told apart from this one")
	}
	if err := sidecar.Run(ctx, restCfg, f.Config); err != nil {
		// What ends the sidecar is for a person to read, most often a port in use at start: one line,
		// naming the flag, rather than a log entry with a stack trace of main.
		fmt.Fprintln(os.Stderr, "sharestate-sidecar:", err)
		os.Exit(1)
	}
}
