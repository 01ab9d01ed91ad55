package main

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/internal/sidecar"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// validFlags are the flags' defaults, with a broker's identity.
func validFlags() *flags {
	return &flags{brokerIDSet: true, Config: sidecar.Config{
		ListenAddress: "127.0.0.1:9089", HealthProbeBindAddress: ":9087", MetricsBindAddress: "0",
		Namespace: "kafka", Identity: persister.Identity{BrokerID: 1, PodName: "kafka-1"},
		MaxRequestBytes: 8 << 20, MaxQueuedRequestBytes: 32 << 20, IdleTimeout: 10 * time.Minute,
		RequestTimeout: 30 * time.Second, MaxInFlightPerConnection: 1024, ShutdownTimeout: 30 * time.Second,
		OperationTimeout: 15 * time.Second, MaxPendingWrites: 4096, MaxCacheBytes: persister.DefaultMaxCacheBytes,
		WriteBurst: 400, BulkBurst: 200,
	}}
}

// wantProblems checks that err names every wanted problem, and exactly as many as wanted.
func wantProblems(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want %q", want)
	}
	lines := strings.Split(err.Error(), "\n")
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q:\n%v", w, err)
		}
	}
	if len(lines) != len(want) {
		t.Errorf("%d problems, want %d:\n%v", len(lines), len(want), err)
	}
}

func TestValidateFlags(t *testing.T) {
	if err := validateFlags(validFlags()); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	f := validFlags()
	f.Namespace = "Bad_NS"
	f.MaxInFlightPerConnection = 0
	f.MaxQueuedRequestBytes = 1024
	f.IdleTimeout = -time.Second
	f.OperationTimeout = 0
	f.ProxyMetadataInterval = -time.Second
	wantProblems(t, validateFlags(f),
		`--namespace="Bad_NS" is not a valid namespace name`,
		"--max-in-flight-per-connection=0: must be at least 1",
		"--max-queued-request-bytes=1024: must be at least 8388608",
		"--idle-timeout=-1s: must be above zero",
		"--operation-timeout=0s: must be above zero",
		"--proxy-metadata-interval=-1s: must not be negative",
	)
}

// With no flags and no downward-API variables, every missing flag is named, not only the first.
func TestValidateFlagsNamesEveryMissingFlag(t *testing.T) {
	for _, v := range []string{"POD_NAMESPACE", "POD_NAME", "POD_UID"} {
		t.Setenv(v, "")
	}
	fs := flag.NewFlagSet("sharestate-sidecar", flag.ContinueOnError)
	f := bindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	wantProblems(t, validateFlags(f), "--broker-id is required", "--namespace is required", "--pod-name is required")
}

// A broker id given is never "required": a negative one is out of range, and 0 is a broker id.
func TestValidateFlagsBrokerID(t *testing.T) {
	for _, tc := range []struct {
		arg  string
		want string // empty: valid
	}{
		{"--broker-id=-1", "--broker-id=-1: must be the broker's node.id, 0 or more"},
		{"--broker-id=0", ""},
		{"--broker-id=7", ""},
	} {
		fs := flag.NewFlagSet("sharestate-sidecar", flag.ContinueOnError)
		f := bindFlags(fs)
		if err := fs.Parse([]string{tc.arg, "--namespace=kafka", "--pod-name=kafka-0"}); err != nil {
			t.Fatal(err)
		}
		err := validateFlags(f)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s refused: %v", tc.arg, err)
		case tc.want != "":
			wantProblems(t, err, tc.want)
		}
	}
}

// Every listen address is checked before the sidecar starts: its form, its port, and that no two
// of the sidecar's listeners take the same port.
func TestValidateFlagsAddresses(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*flags)
		want []string
	}{
		{"malformed", func(f *flags) {
			f.ListenAddress, f.HealthProbeBindAddress = "bad", ":99999"
			f.ProxyListenAddress, f.ProxyUpstreamAddress = ":9091", "127.0.0.1"
		}, []string{`--listen-address="bad": want [host]:port`, `--health-probe-bind-address=":99999": the port must be`,
			`--proxy-upstream-address="127.0.0.1": want [host]:port`}},
		{"upstream without a host", func(f *flags) { f.ProxyListenAddress, f.ProxyUpstreamAddress = ":9091", ":19091" },
			[]string{`--proxy-upstream-address=":19091": want the host and port`}},
		{"one port twice", func(f *flags) { f.HealthProbeBindAddress, f.MetricsBindAddress = ":9089", "127.0.0.1:9087" },
			[]string{"--listen-address=127.0.0.1:9089 and --health-probe-bind-address=:9089 take the same port"}},
		{"the default metrics port twice", func(f *flags) { f.HealthProbeBindAddress, f.MetricsBindAddress, f.SecureMetrics = ":9088", "", true },
			[]string{"--health-probe-bind-address=:9088 and --metrics-bind-address=:9088 take the same port"}},
		{"plain metrics beyond loopback", func(f *flags) { f.MetricsBindAddress, f.SecureMetrics = ":9088", false },
			[]string{`--metrics-bind-address=":9088" is not a loopback address`}},
		{"proxy half on", func(f *flags) { f.ProxyListenAddress = ":9091" },
			[]string{"proxy mode needs both --proxy-listen-address and --proxy-upstream-address"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := validFlags()
			tc.set(f)
			wantProblems(t, validateFlags(f), tc.want...)
		})
	}
	f := validFlags() // the same port on two loopback addresses is two ports
	f.HealthProbeBindAddress, f.MetricsBindAddress = "127.0.0.2:9089", "0"
	if err := validateFlags(f); err != nil {
		t.Errorf("listeners on 127.0.0.1:9089 and 127.0.0.2:9089 refused: %v", err)
	}
}
