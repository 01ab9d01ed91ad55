package localcluster

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The local control plane is envtest's ControlPlane, started here rather than through
// envtest.Environment.Start, for two reasons. Environment.Start retries a failed start five times,
// each waiting up to the start timeout and logging a stack trace: the ten minutes a second `make run`
// on the same data used to hang. And it takes no context, so that Ctrl-C could not stop it: here each
// phase stops when the context ends.

const (
	// startTimeout bounds each process's start: envtest's 20 s is too short for etcd on a machine
	// whose cores are busy elsewhere.
	startTimeout = 2 * time.Minute
	stopTimeout  = time.Minute
	// defaultNamespaceTimeout bounds the wait for namespace default, which a new etcd gets a moment
	// after the API server answers (EnsurePod creates a pod there).
	defaultNamespaceTimeout = 30 * time.Second
)

// How an abandoned start stops the processes it started: asked first (SIGTERM, as envtest stops
// them), killed if they have not ended after killAfter, looked for again every sweepInterval until
// the start has returned (a process may be started after the first sweep).
const (
	sweepInterval = 100 * time.Millisecond
	killAfter     = 10 * time.Second
)

// newControlPlane returns a control plane of the binaries in assets (KUBEBUILDER_ASSETS) keeping its
// data in etcdDir, which envtest keeps on Stop (it removes only the directories it made up), so the
// objects survive a restart of `make run`.
func newControlPlane(assets, etcdDir string) *envtest.ControlPlane {
	return &envtest.ControlPlane{
		Etcd: &envtest.Etcd{Path: filepath.Join(assets, "etcd"), DataDir: etcdDir,
			StartTimeout: startTimeout, StopTimeout: stopTimeout},
		APIServer: &envtest.APIServer{Path: filepath.Join(assets, "kube-apiserver"),
			StartTimeout: startTimeout, StopTimeout: stopTimeout},
	}
}

// startControlPlane starts cp, or stops at once when ctx ends first. The start takes no context and
// waits for each process to answer: it runs in a goroutine, and when ctx ends first, the processes it
// started (children of this process running its binaries) are stopped, which ends its waits; what it
// leaves is stopped once it returns.
func startControlPlane(ctx context.Context, cp *envtest.ControlPlane) error {
	binaries := []string{cp.Etcd.Path, cp.APIServer.Path} // read now: the start writes these fields
	done := make(chan error, 1)
	go func() { done <- cp.Start() }()
	select {
	case err := <-done:
		return err // a failed start has stopped what it started
	case <-ctx.Done():
	}
	stopUntilDone(binaries, done)
	_ = cp.Stop()
	return context.Cause(ctx)
}

// stopUntilDone stops the children running binaries until done delivers.
func stopUntilDone[T any](binaries []string, done <-chan T) {
	sig, deadline := syscall.SIGTERM, time.Now().Add(killAfter)
	tick := time.NewTicker(sweepInterval)
	defer tick.Stop()
	for {
		if time.Now().After(deadline) {
			sig = syscall.SIGKILL
		}
		signalGroups(childrenRunning(binaries...), sig)
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

// installCRDs waits for namespace default and installs the CRDs of crdDir, or returns ctx's cause
// when ctx ends first (the install takes no context; it is left to fail against the stopped API
// server).
func installCRDs(ctx context.Context, cfg *rest.Config, crdDir string) error {
	done := make(chan error, 1)
	go func() {
		if err := waitForDefaultNamespace(ctx, cfg); err != nil {
			done <- err
			return
		}
		_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{crdDir}, ErrorIfPathMissing: true})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("installing the CRDs: %w", err)
		}
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func waitForDefaultNamespace(ctx context.Context, cfg *rest.Config) error {
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, defaultNamespaceTimeout, true, func(ctx context.Context) (bool, error) {
		last = cl.Get(ctx, client.ObjectKey{Name: "default"}, &corev1.Namespace{})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("namespace default did not appear within %s: %w", defaultNamespaceTimeout, last)
	}
	return nil
}
