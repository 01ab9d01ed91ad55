package operator

import (
	"errors"
	"fmt"
	"net"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/sharestate/sharestate-operator/controllers"
)

// DefaultTotalsRefresh is --group-totals-refresh's default.
const DefaultTotalsRefresh = controllers.DefaultTotalsRefresh

// DefaultPartitionResync is --partition-resync-period's default.
const DefaultPartitionResync = controllers.DefaultResyncPeriod

// Validate checks the options as given, each against what it can be, and returns every problem at
// once. Zero is not "the default" here: on the command line every flag carries its default, so a
// zero there was typed, and --max-concurrent-reconciles=0 quietly becoming 16 would hide the typo.
// NewManager, for callers that build Options in code, still reads a zero count, refresh or QPS as
// the default; cmd/sharestate-operator validates the flags before it gets there.
func (o Options) Validate() error {
	var errs []error
	for _, ns := range o.WatchNamespaces {
		errs = append(errs, namespaceName("--watch-namespace", ns))
	}
	if o.LeaderElectionNamespace != "" {
		errs = append(errs, namespaceName("--leader-election-namespace", o.LeaderElectionNamespace))
	}
	errs = append(errs,
		bindAddress("--metrics-bind-address", o.MetricsBindAddress),
		bindAddress("--health-probe-bind-address", o.HealthProbeBindAddress))
	if o.PprofBindAddress != "" { // empty is off, as "0" is
		errs = append(errs, bindAddress("--pprof-bind-address", o.PprofBindAddress))
	}
	if o.MaxConcurrentReconciles < 1 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles=%d: must be at least 1", o.MaxConcurrentReconciles))
	}
	if o.NotReadyGrace < 0 {
		errs = append(errs, fmt.Errorf("--fence-not-ready-after=%s: must not be negative (0 turns it off)", o.NotReadyGrace))
	}
	if o.TotalsRefresh <= 0 {
		errs = append(errs, fmt.Errorf("--group-totals-refresh=%s: must be above zero", o.TotalsRefresh))
	}
	if o.PartitionResync <= 0 {
		errs = append(errs, fmt.Errorf("--partition-resync-period=%s: must be above zero", o.PartitionResync))
	}
	if o.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps=%v: must be above zero", o.KubeAPIQPS))
	}
	if o.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst=%d: must be at least 1", o.KubeAPIBurst))
	}
	return errors.Join(errs...)
}

// namespaceName checks a namespace's name: a DNS-1123 label, as the API server requires.
func namespaceName(flag, ns string) error {
	if problems := validation.IsDNS1123Label(ns); len(problems) > 0 {
		return fmt.Errorf("%s=%q is not a valid namespace name: %s", flag, ns, problems[0])
	}
	return nil
}

// bindAddress checks a listen address: "0" (off), or [host]:port with a port from 0 to 65535.
func bindAddress(flag, addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s=%q: want [host]:port, or 0 to turn it off: %w", flag, addr, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%s=%q: the port must be a number from 0 to 65535", flag, addr)
	}
	return nil
}
