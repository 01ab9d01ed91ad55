package bench

import (
	"os"
	"testing"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// env is the control plane the integration tests share; each works in a namespace of its own. It is
// nil with -short.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() { env = e; return nil }))
}
