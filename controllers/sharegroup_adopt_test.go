package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// handMadeState creates a SharePartitionState of the group's partition 0 of topicA by hand, under name.
func handMadeState(t *testing.T, ns, name, group string) *sharestatev1.SharePartitionState {
	t.Helper()
	sps := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: sharestatev1.SharePartitionStateSpec{GroupID: sharestatev1.GroupID(group),
			TopicID: sharestatev1.TopicID(topicA.String()), Partition: 0},
	}
	if err := env.Client.Create(ctx, sps); err != nil {
		t.Fatal(err)
	}
	return sps
}

// TestGroupDoesNotAdoptMisnamedState: of two hand-made objects for the same partition, the group adopts
// the one under the derived name (and names its topic, which the group declares) and not the other,
// which its MisnamedPartitionStates condition and a Warning name.
func TestGroupDoesNotAdoptMisnamedState(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	handMadeState(t, ns, sharestatev1.SharePartitionStateName("g", topicA.String(), 0), "g")
	stray := handMadeState(t, ns, "g-0-example", "g")
	sg := declaredGroup(t, ns, "g", 2)

	testenv.Eventually(t, 20*time.Second, func() error {
		got := getSPS(t, spsKey(ns, "g", 0))
		if owner := metav1.GetControllerOf(got); owner == nil || owner.UID != sg.UID || got.Spec.TopicName != "orders" {
			return fmt.Errorf("the derived object is not adopted with its topic's name: owner %v, topicName %q", owner, got.Spec.TopicName)
		}
		g := getGroup(t, sg)
		c := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionMisnamedPartitionStates)
		if c == nil || c.Status != metav1.ConditionTrue || c.Reason != sharestatev1.ReasonNameNotDerivedFromKey || !strings.Contains(c.Message, stray.Name) {
			return fmt.Errorf("condition %+v", c)
		}
		if g.Status.Partitions != 1 {
			return fmt.Errorf("status.partitions %d, want 1 (the misnamed object is not the group's)", g.Status.Partitions)
		}
		return nil
	})
	consistently(t, 2*time.Second, func() error {
		got := getSPS(t, client.ObjectKeyFromObject(stray))
		if owner := metav1.GetControllerOf(got); owner != nil {
			return fmt.Errorf("the misnamed object was adopted by %s", owner.Name)
		}
		return nil
	})
	eventFor(t, ns, sg.Name, sharestatev1.EventReasonMisnamedPartitionState)
}
