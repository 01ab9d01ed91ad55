package main_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// env is the control plane every test of this package shares; each test works in a namespace of its
// own and runs sidecars of its own. It is nil with -short.
var env *testenv.Env

// binDir holds the sidecar binary, built once by the first test that needs it.
var binDir string

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // the in-process persisters' clients log through it
	code := testenv.Run(m, func(e *testenv.Env) func() { env = e; return nil })
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce   sync.Once
	sidecarPath string
	buildErr    error
)

// sidecarBinary builds cmd/sharestate-sidecar (once per test binary) and returns its path. The tests
// drive the binary a broker pod runs, flags, signals and all, not the package inside it.
func sidecarBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sharestate-sidecar-test-")
		if err != nil {
			buildErr = err
			return
		}
		binDir = dir
		sidecarPath = filepath.Join(dir, "sharestate-sidecar")
		cmd := exec.Command("go", "build", "-o", sidecarPath, ".")
		cmd.Dir = filepath.Join(testenv.RepoRoot(), "cmd", "sharestate-sidecar")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return sidecarPath
}
