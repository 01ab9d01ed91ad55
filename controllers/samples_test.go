package controllers_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestSamplesApplyAsOneGroupWithOnePartition applies config/samples the kubebuilder way (kubectl
// apply -k) with the operator running: the group adopts the sample's partition state, which is the
// one the persister would use for partition 0, and nothing is misnamed.
func TestSamplesApplyAsOneGroupWithOnePartition(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	apply := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "--kubeconfig", testenv.AdminKubeconfig(t, env.Config),
		"apply", "-n", ns, "-k", filepath.Join(testenv.RepoRoot(), "config", "samples"))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k config/samples: %v\n%s", err, out)
	}
	sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"}}
	testenv.Eventually(t, 20*time.Second, func() error {
		g := getGroup(t, sg)
		if g.Status.Partitions != 1 || g.Status.ObservedGeneration != g.Generation {
			return fmt.Errorf("status.partitions %d at generation %d of %d", g.Status.Partitions, g.Status.ObservedGeneration, g.Generation)
		}
		if c := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionMisnamedPartitionStates); c == nil || c.Status != metav1.ConditionFalse {
			return fmt.Errorf("MisnamedPartitionStates %+v", c)
		}
		var list sharestatev1.SharePartitionStateList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].Name != sharestatev1.SharePartitionStateName("orders-processors", topicA.String(), 0) {
			return fmt.Errorf("%d SharePartitionStates, want partition 0's under its derived name", len(list.Items))
		}
		if owner := metav1.GetControllerOf(&list.Items[0]); owner == nil || owner.Name != sg.Name {
			return fmt.Errorf("the sample's state is not adopted: owner %v", owner)
		}
		return nil
	})
}
