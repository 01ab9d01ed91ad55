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
	"path/filepath"
	"strings"
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
	if explicit != "" {
		if err := CheckNamed("--kubeconfig", explicit); err != nil {
			return nil, err
		}
	} else if os.Getenv(clientcmd.RecommendedConfigPathEnvVar) == "" {
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

// LoadFiles returns the configuration that the kubeconfig files of list make up, the paths separated
// and the files merged as in $KUBECONFIG; source names where list came from, for the errors.
func LoadFiles(source, list string) (*rest.Config, error) {
	if err := CheckNamed(source, list); err != nil {
		return nil, err
	}
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(list)}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if isEmptyConfig(err) {
		return nil, fmt.Errorf("no Kubernetes configuration: %s names %s, which configures no cluster", source, list)
	}
	if err != nil {
		return nil, fmt.Errorf("loading the Kubernetes configuration %s names (%s): %w", source, list, err)
	}
	return cfg, nil
}

// Explain replaces client-go's error for a missing configuration (and ErrNoConfig) with what is
// missing: the files $KUBECONFIG names, if it names only files that do not exist, or else
// ErrNoConfig. It returns any other error as it is, so a command can pass every error it prints
// through it.
func Explain(err error) error {
	var missing *MissingFilesError
	noConfig := errors.Is(err, ErrNoConfig) || isEmptyConfig(err)
	if !noConfig || errors.As(err, &missing) {
		return err // another error, or one that already names the missing files
	}
	if err := CheckNamed("$KUBECONFIG", os.Getenv(clientcmd.RecommendedConfigPathEnvVar)); err != nil {
		return err
	}
	return ErrNoConfig
}

// isEmptyConfig says whether err is, or wraps, client-go's error for no configuration: client-go's
// check does not unwrap.
func isEmptyConfig(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if clientcmd.IsEmptyConfig(e) {
			return true
		}
	}
	return false
}

// MissingFilesError says that the kubeconfig files a flag or $KUBECONFIG names do not exist. client-go
// skips the missing files of $KUBECONFIG in silence and then finds no configuration at all, which
// sends a user looking for a setting they did make.
type MissingFilesError struct {
	// Source is what named the files: "$KUBECONFIG" or a flag.
	Source string
	// Files are the files it named; none of them exists.
	Files []string
}

func (e *MissingFilesError) Error() string {
	if len(e.Files) == 1 {
		return fmt.Sprintf("no Kubernetes configuration: %s names %s, which does not exist", e.Source, e.Files[0])
	}
	return fmt.Sprintf("no Kubernetes configuration: %s names %s, none of which exists", e.Source, strings.Join(e.Files, ", "))
}

// Is makes a MissingFilesError an ErrNoConfig, for callers that only ask whether a configuration was
// found.
func (e *MissingFilesError) Is(target error) bool { return target == ErrNoConfig }

// CheckNamed returns a *MissingFilesError when list, paths separated as in $KUBECONFIG, names files
// and none of them exists; nil when one exists or list names none. source names where list came from.
func CheckNamed(source, list string) error {
	var named []string
	for _, path := range filepath.SplitList(list) {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
			return nil // it exists, or is unreadable for a reason loading it will report
		}
		named = append(named, path)
	}
	if len(named) == 0 {
		return nil
	}
	return &MissingFilesError{Source: source, Files: named}
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
