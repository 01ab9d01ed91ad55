package plugin_test

import (
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// groupWithState creates a group with initialized partitions, and waits until the operator holds it
// with its finalizer (so that deleting it deletes its partitions' state).
func groupWithState(t *testing.T, ns, group string, partitions int32) *sharestatev1.ShareGroup {
	t.Helper()
	sg := declareGroup(t, ns, group, partitions)
	b := newBroker(t, ns, group, 1, nil)
	for part := range partitions {
		b.initialize(part, 0, 0)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if !controllerutil.ContainsFinalizer(getGroup(t, sg), sharestatev1.FinalizerPartitionState) {
			return fmt.Errorf("the operator has not added its finalizer to %s", sg.Name)
		}
		return nil
	})
	return sg
}

// expectGroupKept checks that a refused delete left the group and its state alone.
func expectGroupKept(t *testing.T, sg *sharestatev1.ShareGroup, partitions int) {
	t.Helper()
	if g := getGroup(t, sg); !g.DeletionTimestamp.IsZero() {
		t.Fatalf("the group is being deleted after a refused confirmation")
	}
	if n := countPartitions(t, sg); n != partitions {
		t.Fatalf("%d partition states left, want %d", n, partitions)
	}
}

func countPartitions(t *testing.T, sg *sharestatev1.ShareGroup) int {
	t.Helper()
	var list sharestatev1.SharePartitionStateList
	if err := env.Client.List(ctx, &list, client.InNamespace(sg.Namespace), client.MatchingLabels{sharestatev1.LabelShareGroup: sg.Name}); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func expectGroupGone(t *testing.T, sg *sharestatev1.ShareGroup) {
	t.Helper()
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sg), &sharestatev1.ShareGroup{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the group is still there: %v", err)
	}
	if n := countPartitions(t, sg); n != 0 {
		t.Fatalf("%d partition states left after the group was deleted", n)
	}
}

func TestDeleteGroupAsksForTheGroupID(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	const group = "delete-orders"
	sg := groupWithState(t, ns, group, 2)
	args := []string{"delete", "group", sg.Name, "-n", ns, "--timeout", "30s"}

	r := mustFail(t, "delete-order\n", `confirmation "delete-order" is not the group id "delete-orders"; nothing was deleted`, args...)
	lineMatching(t, r.out, `^ShareGroup `+ns+`/`+sg.Name+` \(group id "delete-orders"\) will be deleted, and with it the state of its 2 partitions`)
	lineMatching(t, r.out, `Type the group id to confirm: $`)
	expectGroupKept(t, sg, 2)
	mustFail(t, "", "no confirmation: stdin ended without an answer; nothing was deleted", args...)
	expectGroupKept(t, sg, 2)

	// Found by group id this time, and confirmed.
	r = kubectlSharestate(t, "delete-orders\n", "delete", "group", group, "-n", ns, "--timeout", "30s")
	if r.err != nil {
		t.Fatal(r.err)
	}
	lineMatching(t, r.out, `sharegroup `+ns+`/`+sg.Name+` deleted$`)
	lineMatching(t, r.out, `^The operator deleted the state of its 2 partitions\.$`)
	expectGroupGone(t, sg)
	mustFail(t, "delete-orders\n", `no ShareGroup named "delete-orders"`, "delete", "group", group, "-n", ns)
}

func TestDeleteGroupWithYes(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	sg := groupWithState(t, ns, "delete-yes", 1)
	out := mustRun(t, "delete", "group", sg.Name, "-n", ns, "--yes", "--timeout", "30s")
	lineMatching(t, out, `^The operator deleted the state of its 1 partition\.$`)
	expectGroupGone(t, sg)
}
