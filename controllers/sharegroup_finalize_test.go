package controllers_test

import (
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestGroupDeletionWaitsForItsPartitionStates: a deleted group whose partition state someone else
// holds with a finalizer keeps its own finalizer until that state is gone, then goes within seconds.
func TestGroupDeletionWaitsForItsPartitionStates(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	const hold = "example.com/hold"
	held := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.SharePartitionStateName("g", topicA.String(), 0), Finalizers: []string{hold}},
		Spec:       sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: sharestatev1.TopicID(topicA.String()), Partition: 0},
	}
	if err := env.Client.Create(ctx, held); err != nil {
		t.Fatal(err)
	}
	sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held-group"}, Spec: sharestatev1.ShareGroupSpec{GroupID: "g"}}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		var got sharestatev1.SharePartitionState
		testenv.Get(t, env.Client, client.ObjectKeyFromObject(held), &got)
		if got.Labels[sharestatev1.LabelShareGroup] != sg.Name {
			return fmt.Errorf("not adopted yet: labels %v", got.Labels)
		}
		return nil
	})
	if err := env.Client.Delete(ctx, sg); err != nil {
		t.Fatal(err)
	}

	consistently(t, 3*time.Second, func() error {
		var got sharestatev1.ShareGroup
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sg), &got); err != nil {
			return fmt.Errorf("the group went while its partition state is held: %w", err)
		}
		return nil
	})
	var got sharestatev1.SharePartitionState
	testenv.Get(t, env.Client, client.ObjectKeyFromObject(held), &got)
	if got.DeletionTimestamp.IsZero() {
		t.Fatal("the group's partition state was not deleted")
	}

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`))
	if err := env.Client.Patch(ctx, &got, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sg), &sharestatev1.ShareGroup{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("group still there: %w", err)
		}
		return nil
	})
}
