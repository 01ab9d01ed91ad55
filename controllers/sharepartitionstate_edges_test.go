package controllers_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The operator reports on an object the persister created but has not initialized yet. Its write
// must not give the state a start offset: Initialize at -1 (what Kafka's group coordinator sends for a
// new group) used to be refused by the schema after the operator had stored startOffset 0, and every
// Read then answered INVALID_REQUEST.
func TestInitializeAfterTheOperatorReportedNotInitialized(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName("g")}, Spec: sharestatev1.ShareGroupSpec{GroupID: "g"}}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	// The object as the persister creates it, before its first status write.
	obj := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: spsKey(ns, "g", 0).Name, Labels: map[string]string{sharestatev1.LabelShareGroup: sg.Name}},
		Spec:       sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: sharestatev1.TopicID(topicA.String()), Partition: 0},
	}
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		c := meta.FindStatusCondition(getSPS(t, spsKey(ns, "g", 0)).Status.Conditions, sharestatev1.ConditionInitialized)
		if c == nil || c.Reason != sharestatev1.ReasonNotInitialized {
			return fmt.Errorf("the operator has not reported yet: %+v", c)
		}
		return nil
	})
	pod := brokerPod(t, ns, "broker-1", true)
	p := persisterFor(t, ns, 1, pod, "")
	initialize(t, p, "g", 0, 0, -1)
	if r := read(p, "g", 0, 1); r.ErrorCode != sharestate.ErrNone || r.StartOffset != -1 {
		t.Fatalf("read: %+v", r)
	}
}

// 200 new partitions initialized at -1 while the operator reports on each as it appears: all 200
// Initializes and all 200 Reads succeed.
func TestInitializeManyPartitionsWhileTheOperatorRuns(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", true)
	p := persisterFor(t, ns, 1, pod, "")
	const partitions = 200
	initReq := sharestate.InitializeRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.InitializePartition]{{TopicID: topicA}}}
	readReq := sharestate.ReadRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadPartition]{{TopicID: topicA}}}
	for i := range int32(partitions) {
		initReq.Topics[0].Partitions = append(initReq.Topics[0].Partitions, sharestate.InitializePartition{Partition: i, StartOffset: -1})
		readReq.Topics[0].Partitions = append(readReq.Topics[0].Partitions, sharestate.ReadPartition{Partition: i, LeaderEpoch: 1})
	}
	failed := 0
	for _, r := range initializeRetrying(p, initReq) {
		if r.ErrorCode != sharestate.ErrNone {
			failed++
			t.Errorf("initialize partition %d: %s (%s)", r.Partition, r.ErrorCode, r.ErrorMessage)
		}
	}
	for _, r := range p.Read(ctx, readReq).Topics[0].Partitions {
		if r.ErrorCode != sharestate.ErrNone || r.StartOffset != -1 {
			failed++
			t.Errorf("read partition %d: %s (%s), start offset %d", r.Partition, r.ErrorCode, r.ErrorMessage, r.StartOffset)
		}
	}
	if failed > 0 {
		t.Fatalf("%d of %d answers failed", failed, 2*partitions)
	}
}

// initializeRetrying initializes req's partitions (one topic) and, as Kafka's persister client does,
// sends again those answered with a retriable error, up to five times: on a loaded machine a status
// update can outlast the persister's deadline (COORDINATOR_NOT_AVAILABLE), which is the answer a
// broker then retries, not a failure. It returns the last answer of every partition.
func initializeRetrying(p sharestate.Store, req sharestate.InitializeRequest) []sharestate.PartitionResult {
	final := map[int32]sharestate.PartitionResult{}
	pending := req
	for attempt := 0; attempt < 5 && len(pending.Topics[0].Partitions) > 0; attempt++ {
		var again []sharestate.InitializePartition
		byPartition := map[int32]sharestate.InitializePartition{}
		for _, in := range pending.Topics[0].Partitions {
			byPartition[in.Partition] = in
		}
		for _, r := range p.Initialize(ctx, pending).Topics[0].Partitions {
			final[r.Partition] = r
			if r.ErrorCode.Retriable() {
				again = append(again, byPartition[r.Partition])
			}
		}
		pending.Topics = []sharestate.TopicData[sharestate.InitializePartition]{{TopicID: req.Topics[0].TopicID, Partitions: again}}
	}
	out := make([]sharestate.PartitionResult, 0, len(final))
	for _, in := range req.Topics[0].Partitions {
		out = append(out, final[in.Partition])
	}
	return out
}

// A stale leader at the highest state epoch cannot be fenced without overflowing it: the operator says
// so in the Fenced condition and an event, counts it, and does not fail its reconciles over it.
func TestFenceRefusedAtTheHighestStateEpoch(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	first := brokerPod(t, ns, "broker-1", true)
	p1 := persisterFor(t, ns, 1, first, "")
	initialize(t, p1, "g", 0, math.MaxInt32-1, 0)
	if r := read(p1, "g", 0, 1); r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("read: %s", r.ErrorCode)
	}
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	// The last fence the state epoch has room for.
	testenv.Eventually(t, 15*time.Second, func() error {
		if obj := getSPS(t, spsKey(ns, "g", 0)); obj.Status.StateEpoch != math.MaxInt32 || obj.Status.Leader != nil {
			return fmt.Errorf("not fenced: %+v", obj.Status)
		}
		return nil
	})
	second := brokerPod(t, ns, "broker-2", true)
	p2 := persisterFor(t, ns, 2, second, "")
	if r := read(p2, "g", 0, 2); r.ErrorCode != sharestate.ErrNone || r.StateEpoch != math.MaxInt32 {
		t.Fatalf("the second leader's read: %+v", r)
	}
	if err := env.Client.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, func() error {
		obj := getSPS(t, spsKey(ns, "g", 0))
		c := meta.FindStatusCondition(obj.Status.Conditions, sharestatev1.ConditionFenced)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != sharestatev1.ReasonStateEpochExhausted {
			return fmt.Errorf("no refusal reported: %+v", c)
		}
		if obj.Status.StateEpoch != math.MaxInt32 || obj.Status.Leader == nil || obj.Status.Leader.PodName != "broker-2" {
			return fmt.Errorf("state epoch %d leader %+v, want it untouched", obj.Status.StateEpoch, obj.Status.Leader)
		}
		return nil
	})
	eventFor(t, ns, spsKey(ns, "g", 0).Name, sharestatev1.EventReasonFenceRefused)
}

// A leader the operator fenced because its pod is terminating may Read again (Kafka's share-partition
// leader does after FENCED); from that same pod, at the same leader epoch, it is answered
// FENCED_LEADER_EPOCH and never becomes the recorded leader again.
func TestFencedTerminatingPodCannotLeadAgain(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	pod := brokerPod(t, ns, "broker-1", true)
	pod.Finalizers = []string{"test.sharestate.dev/hold"} // keeps the pod terminating
	if err := env.Client.Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Client.Patch(ctx, pod, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)))
	})
	old := leading(t, ns, "g", pod, "")
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	expectFenced(t, ns, "g", old, sharestatev1.ReasonLeaderPodTerminating)
	fenced := getSPS(t, spsKey(ns, "g", 0)).Status.FencedLeader
	if fenced == nil || fenced.PodUID != string(pod.UID) || fenced.LeaderEpoch != 1 {
		t.Fatalf("fencedLeader %+v, want the terminating pod at leader epoch 1", fenced)
	}

	if r := read(old, "g", 0, 1); r.ErrorCode != sharestate.ErrFencedLeaderEpoch {
		t.Fatalf("the fenced pod's Read: %s (%s), want FENCED_LEADER_EPOCH", r.ErrorCode, r.ErrorMessage)
	}
	if w := write(old, "g", 0, 2, 1, acked(7)); w.ErrorCode != sharestate.ErrFencedLeaderEpoch {
		t.Fatalf("the fenced pod's Write at the new state epoch: %s (%s), want FENCED_LEADER_EPOCH", w.ErrorCode, w.ErrorMessage)
	}
	obj := getSPS(t, spsKey(ns, "g", 0))
	if obj.Status.Leader != nil || obj.Status.StateEpoch != 2 || obj.Status.WriteCount != 1 {
		t.Fatalf("the fenced pod changed the state: %+v", obj.Status)
	}
	// Another pod takes over as usual.
	next := persisterFor(t, ns, 2, brokerPod(t, ns, "broker-2", true), "")
	if r := read(next, "g", 0, 2); r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("the new leader's Read: %s", r.ErrorCode)
	}
	_ = corev1.PodRunning
}

// A reset needs a state epoch above every partition's that Initialize still accepts: at the top it is
// refused with a condition, and nothing is recorded or initialized.
func TestOffsetResetRefusedAtTheHighestStateEpoch(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg := declaredGroup(t, ns, "g", 1)
	p := persisterFor(t, ns, 1, brokerPod(t, ns, "broker-1", true), "")
	initialize(t, p, "g", 0, math.MaxInt32-1, 7)
	requestReset(t, sg, "top", sharestatev1.OffsetResetTopic{TopicID: sharestatev1.TopicID(topicA.String()), To: sharestatev1.OffsetResetToEarliest})
	testenv.Eventually(t, 10*time.Second, func() error {
		g := getGroup(t, sg)
		c := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionOffsetReset)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != sharestatev1.ReasonStateEpochExhausted {
			return fmt.Errorf("condition %+v", c)
		}
		if g.Status.LastOffsetReset != nil {
			return fmt.Errorf("a refused reset was recorded: %+v", g.Status.LastOffsetReset)
		}
		return nil
	})
	if obj := getSPS(t, spsKey(ns, "g", 0)); obj.Status.StateEpoch != math.MaxInt32-1 || obj.Status.StartOffset != 7 {
		t.Fatalf("the partition changed: %+v", obj.Status)
	}
}
