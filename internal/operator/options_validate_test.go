package operator

import (
	"strings"
	"testing"
	"time"
)

// flagDefaults are the options as cmd/sharestate-operator's flags default them.
func flagDefaults() Options {
	return Options{
		MetricsBindAddress: "0", HealthProbeBindAddress: ":8081", SecureMetrics: true,
		MaxConcurrentReconciles: DefaultMaxConcurrentReconciles, TotalsRefresh: DefaultTotalsRefresh,
		PartitionResync: DefaultPartitionResync,
		KubeAPIQPS:      DefaultKubeAPIQPS, KubeAPIBurst: DefaultKubeAPIBurst,
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Options)
		want   []string // substrings of the error; none: valid
	}{
		{name: "the flags' defaults", change: func(*Options) {}},
		{name: "namespaces and addresses", change: func(o *Options) {
			o.WatchNamespaces = []string{"kafka", "kafka-2"}
			o.LeaderElectionNamespace = "sharestate-system"
			o.MetricsBindAddress, o.HealthProbeBindAddress = ":8443", "127.0.0.1:0"
			o.NotReadyGrace = time.Minute
			o.MaxConcurrentReconciles = 1
		}},
		{name: "a namespace that cannot exist", change: func(o *Options) { o.WatchNamespaces = []string{"kafka", "Bad_NS"} },
			want: []string{`--watch-namespace="Bad_NS" is not a valid namespace name`}},
		{name: "leader election namespace", change: func(o *Options) { o.LeaderElectionNamespace = "-x" },
			want: []string{`--leader-election-namespace="-x"`}},
		{name: "zero workers", change: func(o *Options) { o.MaxConcurrentReconciles = 0 },
			want: []string{"--max-concurrent-reconciles=0: must be at least 1"}},
		{name: "negative grace", change: func(o *Options) { o.NotReadyGrace = -time.Second },
			want: []string{"--fence-not-ready-after=-1s"}},
		{name: "zero refresh", change: func(o *Options) { o.TotalsRefresh = 0 },
			want: []string{"--group-totals-refresh=0s"}},
		{name: "zero resync period", change: func(o *Options) { o.PartitionResync = 0 },
			want: []string{"--partition-resync-period=0s: must be above zero"}},
		{name: "client limits", change: func(o *Options) { o.KubeAPIQPS, o.KubeAPIBurst = -1, 0 },
			want: []string{"--kube-api-qps=-1", "--kube-api-burst=0"}},
		{name: "addresses", change: func(o *Options) {
			o.MetricsBindAddress, o.HealthProbeBindAddress, o.PprofBindAddress = "8080", ":99999", "localhost"
		},
			want: []string{`--metrics-bind-address="8080": want [host]:port`, `--health-probe-bind-address=":99999": the port`,
				`--pprof-bind-address="localhost": want [host]:port`}},
		{name: "every problem at once", change: func(o *Options) { o.WatchNamespaces = []string{"A"}; o.MaxConcurrentReconciles = -3 },
			want: []string{`--watch-namespace="A"`, "--max-concurrent-reconciles=-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := flagDefaults()
			tc.change(&o)
			err := o.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate() = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}
