package controllers_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// leading makes the broker in pod the leader of partition 0 of group: Initialize at state epoch 1,
// Read at leader epoch 1, one write. It waits until the operator reports the partition initialized
// and led.
func leading(t *testing.T, ns, group string, pod *corev1.Pod, uid string) *persister.Persister {
	t.Helper()
	p := recordLeader(t, ns, group, pod, uid)
	if w := write(p, group, 0, 1, 1, acked(0)); w.ErrorCode != sharestate.ErrNone {
		t.Fatalf("write: %s", w.ErrorCode)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		obj := getSPS(t, spsKey(ns, group, 0))
		if !meta.IsStatusConditionTrue(obj.Status.Conditions, sharestatev1.ConditionInitialized) {
			return fmt.Errorf("not Initialized: %+v", obj.Status.Conditions)
		}
		if c := meta.FindStatusCondition(obj.Status.Conditions, sharestatev1.ConditionFenced); c == nil || c.Reason != sharestatev1.ReasonLeaderAlive {
			return fmt.Errorf("leader not reported: %+v", obj.Status.Conditions)
		}
		return nil
	})
	return p
}

// recordLeader initializes partition 0 and has the broker in pod Read it, which records it as the
// leader. The tests whose leader is stale from the start use it: the operator may fence the partition
// as soon as the Read lands, before any write.
func recordLeader(t *testing.T, ns, group string, pod *corev1.Pod, uid string) *persister.Persister {
	t.Helper()
	p := persisterFor(t, ns, 1, pod, uid)
	initialize(t, p, group, 0, 1, 0)
	if r := read(p, group, 0, 1); r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("read: %s", r.ErrorCode)
	}
	return p
}

// expectFenced waits for the partition to be fenced for one of reasons, and checks the event and that
// the old leader's writes are refused.
func expectFenced(t *testing.T, ns, group string, old *persister.Persister, reasons ...string) {
	t.Helper()
	key := spsKey(ns, group, 0)
	testenv.Eventually(t, 15*time.Second, func() error {
		obj := getSPS(t, key)
		c := meta.FindStatusCondition(obj.Status.Conditions, sharestatev1.ConditionFenced)
		if obj.Status.StateEpoch != 2 || obj.Status.Leader != nil || c == nil || c.Status != "True" || !slices.Contains(reasons, c.Reason) {
			return fmt.Errorf("not fenced for %v: stateEpoch %d leader %+v condition %+v", reasons, obj.Status.StateEpoch, obj.Status.Leader, c)
		}
		return nil
	})
	ev := eventFor(t, ns, key.Name, sharestatev1.EventReasonFenced)
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("event type %s", ev.Type)
	}
	if w := write(old, group, 0, 1, 1, acked(1)); w.ErrorCode != sharestate.ErrFencedStateEpoch {
		t.Fatalf("the fenced leader's write: %s (%s), want FENCED_STATE_EPOCH", w.ErrorCode, w.ErrorMessage)
	}
}

// takeOver has a new broker Read with a higher leader epoch and write at the new state epoch, and
// checks the write before the fence survived and the Fenced condition clears.
func takeOver(t *testing.T, ns, group string) {
	t.Helper()
	pod := brokerPod(t, ns, "broker-new", true)
	next := persisterFor(t, ns, 2, pod, "")
	r := read(next, group, 0, 2)
	if r.ErrorCode != sharestate.ErrNone || r.StateEpoch != 2 || len(r.StateBatches) != 1 || r.StateBatches[0] != acked(0) {
		t.Fatalf("new leader's read: %+v", r)
	}
	if w := write(next, group, 0, 2, 2, acked(1)); w.ErrorCode != sharestate.ErrNone {
		t.Fatalf("new leader's write: %s %s", w.ErrorCode, w.ErrorMessage)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		obj := getSPS(t, spsKey(ns, group, 0))
		if c := meta.FindStatusCondition(obj.Status.Conditions, sharestatev1.ConditionFenced); c == nil || c.Status != "False" {
			return fmt.Errorf("still fenced: %+v", c)
		}
		return nil
	})
	eventFor(t, ns, spsKey(ns, group, 0).Name, sharestatev1.EventReasonLeaderChanged)
}

func TestFenceWhenLeaderPodIsDeleted(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", true)
	old := leading(t, ns, "g", pod, "")
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	// The API server may keep the pod a moment with a deletion timestamp: either verdict is right.
	expectFenced(t, ns, "g", old, sharestatev1.ReasonLeaderPodDeleted, sharestatev1.ReasonLeaderPodTerminating)
	takeOver(t, ns, "g")
}

func TestFenceWhenLeaderPodIsTerminating(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", true)
	pod.Finalizers = []string{"test.sharestate.dev/hold"} // keeps the pod terminating
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pod.Finalizers = nil
		_ = env.Client.Patch(ctx, pod, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	old := leading(t, ns, "g", pod, "")
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	expectFenced(t, ns, "g", old, sharestatev1.ReasonLeaderPodTerminating)
}

func TestFenceWhenLeaderPodFinished(t *testing.T) {
	testenv.Require(t, env)
	for _, phase := range []corev1.PodPhase{corev1.PodFailed, corev1.PodSucceeded} {
		t.Run(string(phase), func(t *testing.T) {
			ns := env.Namespace(t)
			pod := brokerPod(t, ns, "broker-1", true)
			old := leading(t, ns, "g", pod, "")
			pod.Status.Phase = phase
			if err := env.Client.Status().Update(ctx, pod); err != nil {
				t.Fatal(err)
			}
			expectFenced(t, ns, "g", old, sharestatev1.ReasonLeaderPodFinished)
		})
	}
}

// The pod of the recorded name exists, but it is not the one that led: a replacement.
func TestFenceWhenLeaderPodWasReplaced(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", true)
	old := recordLeader(t, ns, "g", pod, "uid-of-the-pod-before")
	expectFenced(t, ns, "g", old, sharestatev1.ReasonLeaderPodReplaced)
}

func TestFenceWhenLeaderPodIsNotReadyPastTheGracePeriod(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", false)
	start := time.Now()
	old := recordLeader(t, ns, "g", pod, "")
	expectFenced(t, ns, "g", old, sharestatev1.ReasonLeaderPodNotReady)
	if elapsed := time.Since(start); elapsed < notReadyGrace-time.Second {
		t.Fatalf("fenced after %v, before the %v grace period", elapsed, notReadyGrace)
	}
}

func TestLiveLeaderIsNeverFenced(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", true)
	p := leading(t, ns, "g", pod, "")
	// Unrelated pods come and go; the leader's pod stays Ready.
	other := brokerPod(t, ns, "broker-2", true)
	if err := env.Client.Delete(ctx, other); err != nil {
		t.Fatal(err)
	}
	consistently(t, notReadyGrace+2*time.Second, func() error {
		obj := getSPS(t, spsKey(ns, "g", 0))
		if obj.Status.StateEpoch != 1 || obj.Status.Leader == nil {
			return fmt.Errorf("a live leader was fenced: %+v", obj.Status)
		}
		return nil
	})
	if w := write(p, "g", 0, 1, 1, acked(5)); w.ErrorCode != sharestate.ErrNone {
		t.Fatalf("the live leader's write: %s", w.ErrorCode)
	}
}
