package main

import (
	"fmt"
	"io"

	"github.com/sharestate/sharestate-operator/test/localcluster"
)

// announce writes to w where the system runs and what to try, as the README's Quickstart does (a
// test holds the commands it prints to the README's).
func announce(w io.Writer, cluster *localcluster.Cluster, cfg config) {
	where := "the cluster of " + cluster.KubeconfigPath
	if cluster.Local {
		where = "a local control plane (data in " + cfg.cluster.RunDir + ")"
	}
	fmt.Fprintf(w, "sharestate: running on %s; CRDs installed; operator started (metrics http://%s/metrics).\n", where, cfg.operator.MetricsBindAddress)
	if cfg.sidecar.ListenAddress != "" {
		fmt.Fprintf(w, "A sidecar for broker 0 (pod default/%s) serves the share-state RPCs (Kafka API keys 83-87) on %s.\n", localBrokerPod, cfg.sidecar.ListenAddress)
	}
	if cfg.sidecar.ListenAddress != "" && cfg.standIn.GroupID != "" {
		fmt.Fprintf(w, "A stand-in broker leads partitions 0-%d of share group %s through it once a ShareGroup of that group id exists.\n",
			cfg.standIn.Partitions-1, cfg.standIn.GroupID)
	}
	fmt.Fprintf(w, `Try, in another shell (the README's Quickstart):
  export KUBECONFIG=%s PATH=$PWD/bin:$PATH   # bin/: the plugin make run built
  kubectl apply -f config/samples/sharestate_v1alpha1_sharegroup.yaml
  kubectl get sps -w                          # the stand-in broker's writes
  kubectl sharestate describe group orders
  kubectl delete pod %s               # a lost broker: the operator fences its partitions
Press Ctrl-C to stop.
`, cluster.KubeconfigPath, localBrokerPod)
}
