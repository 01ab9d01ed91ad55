package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/internal/sidecar"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
	"github.com/sharestate/sharestate-operator/test/localcluster"
)

// localBrokerPod names the Pod object that stands for the local sidecar's broker: the operator fences
// partitions whose leader's pod is gone, so the sidecar's leader records need a pod to point at, and
// deleting it shows the fence.
const localBrokerPod = "local-broker-0"

// runSystem runs the operator, the sidecar and the stand-in broker on cluster until ctx ends or one of
// the first two fails (a port in use, say: the system would be half up), and returns that failure.
func runSystem(ctx context.Context, cluster *localcluster.Cluster, cfg config) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	mgr, err := operator.NewManager(ctx, cluster.Config, cfg.operator)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return mgr.Start(gctx) })
	if cfg.sidecar.ListenAddress != "" {
		if err := startLocalSidecar(gctx, g, cluster, cfg.sidecar); err != nil {
			cancel()
			return errors.Join(err, g.Wait())
		}
		if cfg.standIn.GroupID != "" {
			g.Go(func() error { runStandIn(gctx, cluster, cfg); return nil })
		}
	}
	announce(os.Stdout, cluster, cfg)
	<-gctx.Done()
	fmt.Println("sharestate: stopping")
	return g.Wait()
}

// startLocalSidecar creates (or finds) the local broker's Pod object and runs a sidecar for it in the
// group.
func startLocalSidecar(ctx context.Context, g *errgroup.Group, cluster *localcluster.Cluster, sc sidecar.Config) error {
	pod, err := cluster.EnsurePod(ctx, "default", localBrokerPod)
	if err != nil {
		return err
	}
	sc.Namespace, sc.MetricsBindAddress = "default", "0" // its metrics are the operator's registry's, served above
	sc.ShutdownTimeout = 10 * time.Second
	sc.Identity = persister.Identity{BrokerID: 0, PodName: pod.Name, PodUID: string(pod.UID)}
	sc.Logger = ctrl.Log.WithName("sidecar")
	g.Go(func() error { return sidecar.Run(ctx, cluster.Config, sc) })
	return nil
}

// runStandIn runs the stand-in broker until ctx ends. Its failure is logged, not returned: the rest of
// the system is still worth running.
func runStandIn(ctx context.Context, cluster *localcluster.Cluster, cfg config) {
	opts := cfg.standIn
	opts.Config, opts.Namespace, opts.Address = cluster.Config, "default", cfg.sidecar.ListenAddress
	opts.Logger = ctrl.Log.WithName("stand-in-broker")
	if err := localcluster.RunStandIn(ctx, opts); err != nil && ctx.Err() == nil {
		opts.Logger.Error(err, "The stand-in broker stopped")
	}
}
