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

// TestGroupWithStateOfUndeclaredPartitionsIsNotReady: a Ready group whose declared partition count is
// lowered below the partitions it has state of turns Ready=False, naming them: the brokers are
// answered UNKNOWN_TOPIC_OR_PARTITION for those, and nothing reads their state.
func TestGroupWithStateOfUndeclaredPartitionsIsNotReady(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg, _, _ := groupLedByOneBroker(t, ns, "g", 3, 0)
	waitReady(t, sg, func(c *metav1.Condition) error {
		if c.Status != metav1.ConditionTrue {
			return fmt.Errorf("not Ready: %+v", c)
		}
		return nil
	})
	patch := []byte(`{"spec":{"topics":[{"topicId":"` + topicA.String() + `","name":"orders","partitions":1}]}}`)
	if err := env.Client.Patch(ctx, sg, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	waitReady(t, sg, func(c *metav1.Condition) error {
		if c.Status != metav1.ConditionFalse || c.Reason != sharestatev1.ReasonUndeclaredPartitionStates {
			return fmt.Errorf("Ready %+v, want False with reason %s", c, sharestatev1.ReasonUndeclaredPartitionStates)
		}
		for _, p := range []int32{1, 2} {
			if name := spsKey(ns, "g", p).Name; !strings.Contains(c.Message, name) {
				return fmt.Errorf("Ready's message %q does not name %s (partition %d)", c.Message, name, p)
			}
		}
		return nil
	})
}

// waitReady waits until the group's Ready condition, for its current generation, passes check.
func waitReady(t *testing.T, sg *sharestatev1.ShareGroup, check func(*metav1.Condition) error) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, func() error {
		g := getGroup(t, sg)
		c := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionReady)
		if c == nil || c.ObservedGeneration != g.Generation {
			return fmt.Errorf("Ready not reported for generation %d: %+v", g.Generation, c)
		}
		return check(c)
	})
}
