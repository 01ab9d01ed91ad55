package controllers_test

import (
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// holdLabel marks a ShareGroup whose reset completion the API server refuses to store (holdCompletion).
const holdLabel = "test.sharestate.dev/hold-reset-completion"

// TestOffsetResetEventIsRecordedOnce: a reset whose completion the API server refuses to store for a
// while is retried, pass after pass, and reports itself done with one OffsetReset event, once the
// completion is stored; not one per pass that tried to store it.
func TestOffsetResetEventIsRecordedOnce(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg, _, _ := groupLedByOneBroker(t, ns, "g", 2, 1)
	holdCompletion(t, ns, sg)

	requestReset(t, sg, "held", sharestatev1.OffsetResetTopic{TopicID: sharestatev1.TopicID(topicA.String()), To: sharestatev1.OffsetResetToEarliest})
	testenv.Eventually(t, 20*time.Second, func() error {
		for part := range int32(2) {
			if obj := getSPS(t, spsKey(ns, "g", part)); obj.Status.StateEpoch != 2 {
				return fmt.Errorf("partition %d at state epoch %d, want the reset's, 2", part, obj.Status.StateEpoch)
			}
		}
		return nil
	})
	// The partitions are reset: every pass from now on tries to store the completion, and is refused.
	consistently(t, 2*time.Second, func() error {
		if r := getGroup(t, sg).Status.LastOffsetReset; r == nil || r.CompletionTime != nil {
			return fmt.Errorf("the held completion was stored: %+v", r)
		}
		return nil
	})

	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, holdLabel)
	if err := env.Client.Patch(ctx, sg, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	waitResetDone(t, sg, "held")
	eventFor(t, ns, sg.Name, sharestatev1.EventReasonOffsetReset)
	consistently(t, 2*time.Second, func() error {
		if n := occurrences(t, ns, sg.Name, sharestatev1.EventReasonOffsetReset); n != 1 {
			return fmt.Errorf("%d OffsetReset events for one reset, want 1", n)
		}
		return nil
	})
}

// holdCompletion has the API server refuse every status write that would store a completed offset
// reset for sg while sg carries holdLabel (a ValidatingAdmissionPolicy), as an API server that fails
// those writes would, and waits until the policy is in force.
func holdCompletion(t *testing.T, ns string, sg *sharestatev1.ShareGroup) {
	t.Helper()
	name := "hold-reset-completion-" + ns
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{sharestatev1.GroupVersion.Group},
						APIVersions: []string{sharestatev1.GroupVersion.Version}, Resources: []string{"sharegroups/status"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: fmt.Sprintf(`!has(object.metadata.labels) || !(%q in object.metadata.labels) || !has(object.status) || `+
					`!has(object.status.lastOffsetReset) || !has(object.status.lastOffsetReset.completionTime)`, holdLabel),
				Message: "the test holds the reset's completion",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: name, ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	for _, obj := range []client.Object{policy, binding} {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(ctx, obj) })
	}
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, holdLabel)
	if err := env.Client.Patch(ctx, sg, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	// A dry run of the write the policy refuses: refused once the API server applies the policy.
	testenv.Eventually(t, 20*time.Second, func() error {
		probe := getGroup(t, sg)
		now := metav1.Now()
		probe.Status.LastOffsetReset = &sharestatev1.OffsetResetStatus{ID: "probe", StartTime: &now, CompletionTime: &now}
		err := env.Client.Status().Update(ctx, probe, client.DryRunAll)
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return nil
		}
		return fmt.Errorf("the policy is not in force yet: the probe got %w", err)
	})
}

// occurrences counts how often an event with reason about the object named name was recorded: each
// Event once, or its series' count.
func occurrences(t *testing.T, ns, name, reason string) int32 {
	t.Helper()
	var list eventsv1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, e := range list.Items {
		if e.Regarding.Name != name || e.Reason != reason {
			continue
		}
		if e.Series != nil {
			n += e.Series.Count
		} else {
			n++
		}
	}
	return n
}
