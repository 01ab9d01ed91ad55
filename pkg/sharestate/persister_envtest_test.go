package sharestate_test

import (
	"testing"

	"github.com/sharestate/sharestate-operator/internal/testenv"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

func TestSmokeLifecycle(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 100), sharestate.ErrNone)
	r := read(t, p, "g", 0, 3)
	expectCode(t, "read", r.PartitionResult, sharestate.ErrNone)
	if r.StateEpoch != 1 || r.StartOffset != 100 || len(r.StateBatches) != 0 {
		t.Fatalf("read %+v", r)
	}
	w := sharestate.WritePartition{Partition: 0, StateEpoch: 1, LeaderEpoch: 3, StartOffset: 100, DeliveryCompleteCount: -1,
		StateBatches: []sharestate.StateBatch{batch(100, 104, sharestate.DeliveryStateAcknowledged, 1)}}
	expectCode(t, "write", write(t, p, "g", w), sharestate.ErrNone)
	r = read(t, p, "g", 0, 3)
	if len(r.StateBatches) != 1 || r.StateBatches[0] != batch(100, 104, 2, 1) {
		t.Fatalf("read after write %+v", r)
	}
	s := summary(t, p, "g", 0)
	if s.StateEpoch != 1 || s.LeaderEpoch != 3 || s.StartOffset != 100 {
		t.Fatalf("summary %+v", s)
	}
	expectCode(t, "delete", remove(t, p, "g", 0), sharestate.ErrNone)
	expectCode(t, "read after delete", read(t, p, "g", 0, 3).PartitionResult, sharestate.ErrInvalidRequest)
}
