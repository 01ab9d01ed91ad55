package persister_test

import (
	"os"
	"testing"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// env is the control plane every integration test of this package shares; each test works in a
// namespace of its own (env.Namespace). It is nil with -short.
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() { env = e; return nil }))
}
