// Package kubeconfig loads the Kubernetes client configuration of the project's binaries and says in
// one line what is wrong when there is none, or when its API server does not answer: client-go's own
// words ("try setting KUBERNETES_MASTER", a variable nothing reads any more) and controller-runtime's
// logged stack traces tell a user nothing they can act on.
package kubeconfig

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ErrNoConfig says no configuration was found anywhere it is looked for.
var ErrNoConfig = errors.New("no Kubernetes configuration found: not running in a cluster, and neither " +
	"--kubeconfig, $KUBECONFIG nor ~/.kube/config names one; pass --kubeconfig=<file> or set KUBECONFIG")

// Load returns the client configuration, looked for where controller-runtime's GetConfig looks and in
// the same order: the --kubeconfig flag (controller-runtime registers it on the command line), the
// files $KUBECONFIG lists, the pod's service account when running in a cluster, ~/.kube/config. Unlike
// GetConfig it logs nothing; its errors are one line.
func Load() (*rest.Config, error) {
	explicit := ""
	if f := flag.Lookup("kubeconfig"); f != nil {
		explicit = f.Value.String()
	}
	if explicit == "" && os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
		if cfg, err := rest.InClusterConfig(); err == nil {
			return cfg, nil
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = explicit
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		if err = Explain(err); !errors.Is(err, ErrNoConfig) {
			err = fmt.Errorf("loading the Kubernetes configuration: %w", err)
		}
		return nil, err
	}
	if cfg.QPS == 0 {
		cfg.QPS = -1 // as GetConfig: no client-side limit unless the binary sets one
	}
	return cfg, nil
}

// Explain replaces client-go's error for a missing configuration with ErrNoConfig, and returns any
// other error as it is, so a command can pass every error it prints through it.
func Explain(err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if clientcmd.IsEmptyConfig(e) {
			return ErrNoConfig
		}
	}
	return err
}

// reachTimeout bounds CheckReachable: a server that answers at all answers its version at once.
const reachTimeout = 15 * time.Second

// CheckReachable asks the API server for its version, so that a stopped or mistyped cluster is
// reported at start, in one line naming the server, instead of by whatever first needs it.
func CheckReachable(ctx context.Context, cfg *rest.Config) error {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = reachTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("the Kubernetes configuration for %s is unusable: %w", cfg.Host, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := dc.ServerVersion()
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("cannot reach the Kubernetes API server at %s: %w", cfg.Host, rootCause(err))
	}
	return nil
}

// rootCause is the innermost error: "dial tcp 127.0.0.1:6443: connect: connection refused" says more
// than the URL-and-verb wrapping around it.
func rootCause(err error) error {
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err
		}
		err = inner
	}
}
