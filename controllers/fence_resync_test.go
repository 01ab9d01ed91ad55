package controllers_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The operator finds a pod's partitions by their leader-pod label when the pod goes, and the resync
// finds what no pod event brings. These tests make the pod's events come before the operator could
// know the partition: whatever happens to the pod then is never seen again.

// legacyPartition writes partition 0 of group as a persister from before the leader-pod label did:
// an object with the group label only, then its state at state epoch 1, led by the broker in pod at
// leader epoch 1.
func legacyPartition(t *testing.T, ns, group string, pod *corev1.Pod) client.ObjectKey {
	t.Helper()
	key := spsKey(ns, group, 0)
	obj := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name,
			Labels: map[string]string{sharestatev1.LabelShareGroup: sharestatev1.ShareGroupName(group)}},
		Spec: sharestatev1.SharePartitionStateSpec{GroupID: sharestatev1.GroupID(group), TopicID: sharestatev1.TopicID(topicA.String())},
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	obj.Status = sharestatev1.SharePartitionStateStatus{StateEpoch: 1, LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: -1,
		StateBatches: []sharestatev1.StateBatch{sharestatev1.StateBatch(sharestate.FormatBatch(acked(0)))},
		Leader:       &sharestatev1.LeaderRef{BrokerID: 1, PodName: pod.Name, PodUID: string(pod.UID), LeaderEpoch: 1, Since: now},
		CreateTime:   &now, WriteTime: &now, WriteCount: 1}
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	return key
}

// deletedPod creates a broker pod and deletes it, and waits until it is gone.
func deletedPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := brokerPod(t, ns, name, true)
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		var got corev1.Pod
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(pod), &got); err == nil {
			return fmt.Errorf("pod %s still there", pod.Name)
		}
		return nil
	})
	return pod
}

// waitForLabel waits until the partition's leader-pod label is want.
func waitForLabel(t *testing.T, key client.ObjectKey, want string) *sharestatev1.SharePartitionState {
	t.Helper()
	var obj *sharestatev1.SharePartitionState
	testenv.Eventually(t, 10*time.Second, func() error {
		obj = getSPS(t, key)
		if got, ok := obj.Labels[sharestatev1.LabelLeaderPod]; !ok || got != want {
			return fmt.Errorf("leader-pod label %q (set %v), want %q", got, ok, want)
		}
		return nil
	})
	return obj
}

func removeLeaderLabel(t *testing.T, key client.ObjectKey) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"`+sharestatev1.LabelLeaderPod+`":null}}}`))
	if err := env.Client.Patch(ctx, getSPS(t, key), patch); err != nil {
		t.Fatal(err)
	}
}

// A partition written while the operator was down, by a leader whose pod went meanwhile: the pod's
// deletion came before the partition existed, so only the resync finds it.
func TestFenceOfPartitionCreatedWhileTheOperatorWasDown(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := deletedPod(t, ns, "broker-1")
	legacyPartition(t, ns, "g", pod)
	expectFenced(t, ns, "g", persisterFor(t, ns, 1, pod, ""), sharestatev1.ReasonLeaderPodDeleted)
}

// A persister records a leader, with its label, after the operator saw the last of that leader's
// pod: its first state is written before the operator ever saw the partition.
func TestFenceOfFirstStateWrittenAfterItsLeadersPodWent(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := deletedPod(t, ns, "broker-1")
	old := recordLeader(t, ns, "g", pod, "")
	expectFenced(t, ns, "g", old, sharestatev1.ReasonLeaderPodDeleted)
}

// A leader-pod label removed by hand hides the partition from its pod's events: the pod's deletion
// right after still fences it (the resync), and a label removed or changed while the leader lives is
// put back from status.
func TestLeaderLabelRemovedByHand(t *testing.T) {
	testenv.Require(t, env)
	t.Run("pod deleted at once", func(t *testing.T) {
		ns := env.Namespace(t)
		pod := brokerPod(t, ns, "broker-1", true)
		old := leading(t, ns, "g", pod, "")
		removeLeaderLabel(t, spsKey(ns, "g", 0))
		if err := env.Client.Delete(ctx, pod); err != nil {
			t.Fatal(err)
		}
		expectFenced(t, ns, "g", old, sharestatev1.ReasonLeaderPodDeleted, sharestatev1.ReasonLeaderPodTerminating)
	})
	t.Run("repaired", func(t *testing.T) {
		ns := env.Namespace(t)
		pod := brokerPod(t, ns, "broker-1", true)
		p := leading(t, ns, "g", pod, "")
		key := spsKey(ns, "g", 0)
		removeLeaderLabel(t, key)
		waitForLabel(t, key, pod.Name)
		// A label that names another pod is a hint the status overrules.
		obj := getSPS(t, key)
		patched := obj.DeepCopy()
		patched.Labels[sharestatev1.LabelLeaderPod] = "broker-2"
		if err := env.Client.Patch(ctx, patched, client.MergeFrom(obj)); err != nil {
			t.Fatal(err)
		}
		waitForLabel(t, key, pod.Name)
		// The leader was never fenced meanwhile, and writes on.
		if w := write(p, "g", 0, 1, 1, acked(1)); w.ErrorCode != sharestate.ErrNone {
			t.Fatalf("the leader's write: %s %s", w.ErrorCode, w.ErrorMessage)
		}
	})
}

// Upgrade: a partition written by a persister from before the leader-pod label is labelled from its
// status once, and not written again by later passes; its pod's deletion then fences it.
func TestUpgradeAdoptsPartitionsWithoutTheLeaderLabelOnce(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", true)
	key := legacyPartition(t, ns, "g", pod)
	obj := waitForLabel(t, key, pod.Name)
	// The resync also reports the leader, in the same pass or the next: wait for both to settle.
	testenv.Eventually(t, 10*time.Second, func() error {
		obj = getSPS(t, key)
		if c := findFenced(obj); c == nil || c.Reason != sharestatev1.ReasonLeaderAlive {
			return fmt.Errorf("leader not reported: %+v", obj.Status.Conditions)
		}
		return nil
	})
	settled := obj.ResourceVersion
	consistently(t, 3*resyncPeriod+time.Second, func() error {
		if now := getSPS(t, key); now.ResourceVersion != settled {
			return fmt.Errorf("the partition was written again after its adoption: labels %v, status %+v", now.Labels, now.Status.Conditions)
		}
		return nil
	})
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	expectFenced(t, ns, "g", persisterFor(t, ns, 1, pod, ""), sharestatev1.ReasonLeaderPodDeleted, sharestatev1.ReasonLeaderPodTerminating)
}

func findFenced(obj *sharestatev1.SharePartitionState) *metav1.Condition {
	for i := range obj.Status.Conditions {
		if obj.Status.Conditions[i].Type == sharestatev1.ConditionFenced {
			return &obj.Status.Conditions[i]
		}
	}
	return nil
}
