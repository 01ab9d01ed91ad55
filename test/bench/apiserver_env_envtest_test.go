package bench

import (
	"testing"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The diagnostic's variables reach kube-apiserver: its Go runtime reports the collector's settings
// they set.
func TestScaleAPIServerEnvReachesKubeAPIServer(t *testing.T) {
	testenv.Require(t, env) // starts a control plane of its own, as the scale scenarios do
	own, err := testenv.StartWith(testenv.Options{APIServerEnv: []string{"GOGC=400", "GOMEMLIMIT=3GiB"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = own.Stop() }()
	samples, err := apiserverMetrics(t.Context(), own.Config)
	if err != nil {
		t.Fatal(err)
	}
	if got := samples.sum("go_gc_gogc_percent", ""); got != 400 {
		t.Errorf("kube-apiserver's go_gc_gogc_percent is %v, want 400", got)
	}
	if got := samples.sum("go_gc_gomemlimit_bytes", ""); got != 3<<30 {
		t.Errorf("kube-apiserver's go_gc_gomemlimit_bytes is %v, want %d", got, 3<<30)
	}
}
