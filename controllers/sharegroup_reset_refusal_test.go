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

// waitRefused waits for the OffsetReset condition to refuse the current request with reason, and for
// Ready to say so, and returns the refusal's message.
func waitRefused(t *testing.T, sg *sharestatev1.ShareGroup, reason string) string {
	t.Helper()
	var message string
	testenv.Eventually(t, 10*time.Second, func() error {
		g := getGroup(t, sg)
		c := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionOffsetReset)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || c.ObservedGeneration != g.Generation {
			return fmt.Errorf("OffsetReset condition %+v, want False %s", c, reason)
		}
		ready := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionReady)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != sharestatev1.ReasonResetRefused || ready.Message != c.Message {
			return fmt.Errorf("Ready condition %+v does not show the refusal", ready)
		}
		if g.Status.LastOffsetReset != nil {
			return fmt.Errorf("a refused reset was recorded: %+v", g.Status.LastOffsetReset)
		}
		message = c.Message
		return nil
	})
	return message
}

func TestOffsetResetRefusalSaysWhatAndHow(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg := declaredGroup(t, ns, "g", 2)
	requestReset(t, sg, "bad", sharestatev1.OffsetResetTopic{TopicID: sharestatev1.TopicID(topicA.String()), To: sharestatev1.OffsetResetToEarliest, Partitions: []int32{1, 2}})
	message := waitRefused(t, sg, sharestatev1.ReasonResetUndeclaredPartition)
	for _, want := range []string{`reset "bad" will not run as written`, "partition 2 does not exist", "change or remove spec.offsetReset"} {
		if !strings.Contains(message, want) {
			t.Errorf("message %q does not say %q", message, want)
		}
	}
	if strings.Contains(message, "refused") {
		t.Errorf("message %q says refused: the reason and whoever shows it say that already", message)
	}
	eventFor(t, ns, sg.Name, sharestatev1.EventReasonOffsetResetRefused)

	// Removing the request ends the refusal: nothing is asked any more.
	if err := env.Client.Patch(ctx, sg, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"offsetReset":null}}`))); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		g := getGroup(t, sg)
		if c := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionOffsetReset); c != nil {
			return fmt.Errorf("OffsetReset condition %+v stays after the request was removed", c)
		}
		if ready := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionReady); ready == nil || ready.Reason == sharestatev1.ReasonResetRefused {
			return fmt.Errorf("Ready condition %+v", ready)
		}
		return nil
	})
}

// TestOffsetResetOfGroupThatDeclaresNothing: the persister created the group (no spec.topics), so every
// partition is known; a reset of a topic without a partition list resets the partitions whose state
// exists, and one of a topic with no state says how to declare it.
func TestOffsetResetOfGroupThatDeclaresNothing(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", true)
	p := persisterFor(t, ns, 1, pod, "")
	initialize(t, p, "g", 0, 1, 50)
	initialize(t, p, "g", 3, 2, 70)
	sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName("g")}}
	testenv.Get(t, env.Client, client.ObjectKeyFromObject(sg), sg)
	if len(sg.Spec.Topics) != 0 {
		t.Fatalf("setup: the persister's group declares %+v", sg.Spec.Topics)
	}

	requestReset(t, sg, "unknown-topic", sharestatev1.OffsetResetTopic{TopicID: "AAAAAAAAAAAAAAAAAAAAAQ", To: sharestatev1.OffsetResetToEarliest})
	message := waitRefused(t, sg, sharestatev1.ReasonResetNoPartitions)
	if !strings.Contains(message, "spec.topics (topicId, name, partitions)") || !strings.Contains(message, "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("message %q does not say how to declare the topic and what declaring does", message)
	}

	requestReset(t, sg, "existing", sharestatev1.OffsetResetTopic{TopicID: sharestatev1.TopicID(topicA.String()), To: sharestatev1.OffsetResetToEarliest})
	got := waitResetDone(t, sg, "existing")
	if r := got.Status.LastOffsetReset; r.Partitions != 2 || r.StateEpoch != 3 {
		t.Fatalf("reset %+v, want partitions 0 and 3 at state epoch 3", r)
	}
	for _, part := range []int32{0, 3} {
		if obj := getSPS(t, spsKey(ns, "g", part)); obj.Status.StateEpoch != 3 || obj.Status.StartOffset != 0 {
			t.Errorf("partition %d after the reset: %+v", part, obj.Status)
		}
	}
}
