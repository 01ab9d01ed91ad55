package controllers_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// A leader writes while the operator fences it, many times over: every write answered NONE must be
// visible to the new leader, and no write answered FENCED_STATE_EPOCH (or sent after the fence) may
// land. The write and the fence meet on the same object at once; only the resourceVersion check
// keeps them apart.
func TestWriteRacingAFence(t *testing.T) {
	testenv.Require(t, env)
	const rounds = 20
	ns := env.Namespace(t)
	for round := range rounds {
		group := fmt.Sprintf("race-%d", round)
		pod := brokerPod(t, ns, fmt.Sprintf("broker-%d", round), true)
		p := persisterFor(t, ns, 1, pod, "")
		initialize(t, p, group, 0, 1, 0)
		read(p, group, 0, 1)

		// Delete the pod after a few writes, while the leader keeps writing one new offset at a time.
		var acknowledged, refused []int64
		for offset := int64(0); ; offset++ {
			if offset == int64(3+round%5) {
				go func() { _ = env.Client.Delete(ctx, pod) }()
			}
			w := write(p, group, 0, 1, 1, acked(offset))
			switch w.ErrorCode {
			case sharestate.ErrNone:
				acknowledged = append(acknowledged, offset)
				continue
			case sharestate.ErrFencedStateEpoch:
				refused = append(refused, offset)
			default:
				t.Fatalf("round %d: write of %d: %s %s", round, offset, w.ErrorCode, w.ErrorMessage)
			}
			break
		}
		if offset := len(acknowledged) + len(refused); offset > 5000 {
			t.Fatalf("round %d: never fenced", round)
		}
		// The new leader sees exactly the writes answered NONE.
		next := persisterFor(t, ns, 2, brokerPod(t, ns, fmt.Sprintf("next-%d", round), true), "")
		var r sharestate.ReadResult
		testenv.Eventually(t, 5*time.Second, func() error {
			r = read(next, group, 0, 2)
			if r.ErrorCode != sharestate.ErrNone || r.StateEpoch != 2 {
				return fmt.Errorf("read %+v", r.PartitionResult)
			}
			return nil
		})
		stored := map[int64]bool{}
		for _, b := range r.StateBatches {
			for o := b.FirstOffset; o <= b.LastOffset; o++ {
				stored[o] = true
			}
		}
		for _, o := range acknowledged {
			if !stored[o] {
				t.Fatalf("round %d: offset %d was answered NONE but is lost after the fence", round, o)
			}
		}
		for _, o := range refused {
			if stored[o] {
				t.Fatalf("round %d: offset %d was answered FENCED_STATE_EPOCH but landed", round, o)
			}
		}
		if len(stored) != len(acknowledged) {
			t.Fatalf("round %d: %d offsets stored, %d acknowledged", round, len(stored), len(acknowledged))
		}
	}
}
