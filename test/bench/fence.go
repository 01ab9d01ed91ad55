package bench

import (
	"context"
	"fmt"
	"io"

	"github.com/sharestate/sharestate-operator/test/fencebench"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// Targets of the fence scenario: within 1.5 times the raw updates of the same objects, and under 3 s.
const (
	fenceMaxRatio   = 1.5
	fenceMaxSeconds = 3.0
)

// runFence measures the operator fencing a dead broker's partitions and prints the scenario's line
// (`scenario=fence-<n> seconds=<n> raw_seconds=<n>`) and its targets.
func runFence(ctx context.Context, env *testenv.Env, cfg Config, out, log io.Writer) error {
	name := fmt.Sprintf("fence-%d", cfg.FencePartitions)
	fmt.Fprintf(log, "bench: %s: one broker pod leads %d partitions; deleting it\n", name, cfg.FencePartitions)
	res, err := fencebench.Run(ctx, env.Config, cfg.FencePartitions, cfg.FenceWorkers)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, res.Line(name))
	ratio := res.Fence.Seconds() / res.Raw.Seconds()
	fmt.Fprintf(out, "%s: fence/raw %.2f (target <= %.1f): %s; fence %.3f s (target < %.0f s): %s\n",
		name, ratio, fenceMaxRatio, verdict(ratio <= fenceMaxRatio), res.Fence.Seconds(), fenceMaxSeconds, verdict(res.Fence.Seconds() < fenceMaxSeconds))
	return nil
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}
