package fencebench_test

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/sharestate/sharestate-operator/test/fencebench"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() { env = e; return nil }))
}

// A small run of the benchmark, so that it keeps working between `make bench` runs: every partition
// gets fenced, and both times are measured.
func TestFenceBenchmarkRuns(t *testing.T) {
	testenv.Require(t, env)
	partitions := 100
	if n, err := strconv.Atoi(os.Getenv("FENCE_BENCH_PARTITIONS")); err == nil && n > 0 {
		partitions = n // e.g. FENCE_BENCH_PARTITIONS=1000 for the full scenario
	}
	res, err := fencebench.Run(context.Background(), env.Config, partitions, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res.Line("fence-" + strconv.Itoa(partitions)))
	if res.Fence <= 0 || res.Raw <= 0 {
		t.Fatalf("times not measured: %+v", res)
	}
}
