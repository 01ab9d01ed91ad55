package persister_test

import (
	"context"
	"net/http"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// leaderLabel returns the partition's leader-pod label, and whether it has one.
func leaderLabel(t *testing.T, ns, group string, partition int32) (string, bool) {
	t.Helper()
	v, ok := getObject(t, ns, group, partition).Labels[sharestatev1.LabelLeaderPod]
	return v, ok
}

// The leader-pod label follows the recorded leader's pod: empty at creation, set by the Read that
// records a leader on another pod and by a Write from another pod, and not written again by the
// steady state's Writes.
func TestLeaderPodLabelFollowsTheLeader(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	var counts sync.Map
	first := newPersisterWithConfig(t, countingConfig(&counts), ns, 1)
	second := newPersister(t, ns, 2)
	expectCode(t, "initialize", initialize(t, first, "g", 0, 1, 0), sharestate.ErrNone)
	if v, ok := leaderLabel(t, ns, "g", 0); !ok || v != "" {
		t.Fatalf("label at creation: %q (set %v), want empty", v, ok)
	}
	if g := getObject(t, ns, "g", 0).Labels[sharestatev1.LabelShareGroup]; g == "" {
		t.Fatal("the share-group label is gone")
	}

	expectCode(t, "first reads", read(t, first, "g", 0, 1).PartitionResult, sharestate.ErrNone)
	if v, _ := leaderLabel(t, ns, "g", 0); v != podName(1) {
		t.Fatalf("label after the first leader's Read: %q, want %q", v, podName(1))
	}
	counts.Clear()
	const writes = 10
	for i := range int64(writes) {
		expectCode(t, "write", write(t, first, "g", writeOf(1, 1, i, acked(i, i))), sharestate.ErrNone)
	}
	if gets, puts, patches := count(&counts, http.MethodGet), count(&counts, http.MethodPut), count(&counts, http.MethodPatch); gets != 0 || puts != writes || patches != 0 {
		t.Fatalf("%d steady-state writes made %d GETs, %d PUTs and %d PATCHes, want 0, %d and 0", writes, gets, puts, patches, writes)
	}

	expectCode(t, "second reads", read(t, second, "g", 0, 2).PartitionResult, sharestate.ErrNone)
	if v, _ := leaderLabel(t, ns, "g", 0); v != podName(2) {
		t.Fatalf("label after the second leader's Read: %q, want %q", v, podName(2))
	}
	// A Write from another pod at a still higher leader epoch (no Read first) moves the label too.
	expectCode(t, "first writes at a new leader epoch", write(t, first, "g", writeOf(1, 3, 0, acked(20, 20))), sharestate.ErrNone)
	if v, _ := leaderLabel(t, ns, "g", 0); v != podName(1) {
		t.Fatalf("label after a Write from another pod: %q, want %q", v, podName(1))
	}
}

// A label someone removed or changed by hand is put back by the leader's next Read or Write.
func TestLeaderPodLabelRepairedByTheLeader(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "read", read(t, p, "g", 0, 1).PartitionResult, sharestate.ErrNone)
	obj := getObject(t, ns, "g", 0)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"`+sharestatev1.LabelLeaderPod+`":null}}}`))
	if err := env.Client.Patch(context.Background(), obj, patch); err != nil {
		t.Fatal(err)
	}
	if _, ok := leaderLabel(t, ns, "g", 0); ok {
		t.Fatal("the label was not removed")
	}
	// The persister's cached object is stale now: the write conflicts, reads again, and labels.
	expectCode(t, "write", write(t, p, "g", writeOf(1, 1, 0, acked(0, 0))), sharestate.ErrNone)
	if v, _ := leaderLabel(t, ns, "g", 0); v != podName(1) {
		t.Fatalf("label after the leader's write: %q, want %q", v, podName(1))
	}
}
