package controllers_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// declaredGroup creates a ShareGroup that declares topicA with the given partition count.
func declaredGroup(t *testing.T, ns, group string, partitions int32) *sharestatev1.ShareGroup {
	t.Helper()
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName(group)},
		Spec: sharestatev1.ShareGroupSpec{GroupID: sharestatev1.GroupID(group),
			Topics: []sharestatev1.ShareGroupTopic{{TopicID: sharestatev1.TopicID(topicA.String()), Name: "orders", Partitions: partitions}}},
	}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	return sg
}

// groupLedByOneBroker declares group with the given partition count and has the broker in a new
// Ready pod initialize every partition at stateEpoch and Read it at leader epoch 1, so that it is
// recorded as their leader.
func groupLedByOneBroker(t *testing.T, ns, group string, partitions, stateEpoch int32) (*sharestatev1.ShareGroup, *corev1.Pod, *persister.Persister) {
	t.Helper()
	sg := declaredGroup(t, ns, group, partitions)
	pod := brokerPod(t, ns, "broker-1", true)
	p := persisterFor(t, ns, 1, pod, "")
	for part := range partitions {
		initialize(t, p, group, part, stateEpoch, 0)
		if r := read(p, group, part, 1); r.ErrorCode != sharestate.ErrNone {
			t.Fatalf("read of partition %d: %s", part, r.ErrorCode)
		}
	}
	return sg, pod, p
}

func getGroup(t *testing.T, sg *sharestatev1.ShareGroup) *sharestatev1.ShareGroup {
	t.Helper()
	var got sharestatev1.ShareGroup
	testenv.Get(t, env.Client, client.ObjectKeyFromObject(sg), &got) // a read that fails for a moment is no verdict
	return &got
}

// requestReset sets the group's offset reset request.
func requestReset(t *testing.T, sg *sharestatev1.ShareGroup, id string, topics ...sharestatev1.OffsetResetTopic) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"offsetReset":{"id":%q,"topics":%s}}}`, id, mustJSON(topics))
	if err := env.Client.Patch(ctx, sg, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
}

func waitResetDone(t *testing.T, sg *sharestatev1.ShareGroup, id string) *sharestatev1.ShareGroup {
	t.Helper()
	var got *sharestatev1.ShareGroup
	testenv.Eventually(t, 20*time.Second, func() error {
		got = getGroup(t, sg)
		r := got.Status.LastOffsetReset
		if r == nil || r.ID != id || r.CompletionTime == nil {
			return fmt.Errorf("reset %s not done: %+v %+v", id, r, got.Status.Conditions)
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, sharestatev1.ConditionOffsetReset) {
			return fmt.Errorf("OffsetReset condition %+v", got.Status.Conditions)
		}
		return nil
	})
	return got
}

func TestGroupStatusAggregatesPartitions(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg := declaredGroup(t, ns, "g", 3)
	pod := brokerPod(t, ns, "broker-1", true)
	p := persisterFor(t, ns, 1, pod, "")
	for part := range int32(3) {
		initialize(t, p, "g", part, 0, 0)
	}
	read(p, "g", 0, 1)
	write(p, "g", 0, 0, 1, acked(0), sharestate.StateBatch{FirstOffset: 1, LastOffset: 4, DeliveryState: sharestate.DeliveryStateAvailable, DeliveryCount: 1})
	testenv.Eventually(t, 15*time.Second, func() error {
		s := getGroup(t, sg).Status
		if s.Partitions != 3 || s.InitializedPartitions != 3 || s.PartitionsWithLeader != 1 || s.FencedPartitions != 0 || s.InFlightRecords != 4 {
			return fmt.Errorf("status %+v", s)
		}
		if !meta.IsStatusConditionTrue(s.Conditions, sharestatev1.ConditionReady) || s.ObservedGeneration != sg.Generation {
			return fmt.Errorf("not Ready: %+v", s.Conditions)
		}
		return nil
	})
	// Fencing shows on the group.
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, func() error {
		s := getGroup(t, sg).Status
		if s.FencedPartitions != 1 || !meta.IsStatusConditionTrue(s.Conditions, sharestatev1.ConditionFenced) || meta.IsStatusConditionTrue(s.Conditions, sharestatev1.ConditionReady) {
			return fmt.Errorf("fence not shown: %+v", s)
		}
		return nil
	})
}

func TestGroupAdoptsItsPartitionsAndDeletesThemWithIt(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	// State created before its group's object (by hand here): the group adopts it.
	orphan := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.SharePartitionStateName("g", topicA.String(), 5)},
		Spec:       sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: sharestatev1.TopicID(topicA.String()), Partition: 5},
	}
	if err := env.Client.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	sg := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-group"}, Spec: sharestatev1.ShareGroupSpec{GroupID: "g"}}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		var got sharestatev1.SharePartitionState
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &got); err != nil {
			return err
		}
		if c := metav1.GetControllerOf(&got); c == nil || c.UID != sg.UID || got.Labels[sharestatev1.LabelShareGroup] != sg.Name {
			return fmt.Errorf("not adopted: %+v %v", got.OwnerReferences, got.Labels)
		}
		return nil
	})
	if err := env.Client.Delete(ctx, sg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &sharestatev1.SharePartitionState{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("partition state still there: %w", err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sg), &sharestatev1.ShareGroup{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("group still there: %w", err)
		}
		return nil
	})
}

func TestOffsetResetFencesAndRunsOnce(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg := declaredGroup(t, ns, "g", 3)
	pod := brokerPod(t, ns, "broker-1", true)
	old := persisterFor(t, ns, 1, pod, "")
	for part := range int32(3) {
		initialize(t, old, "g", part, 4, 0)
		read(old, "g", part, 7)
		if w := write(old, "g", part, 4, 7, acked(10), acked(11)); w.ErrorCode != sharestate.ErrNone {
			t.Fatal(w.ErrorCode)
		}
	}
	requestReset(t, sg, "reset-1", sharestatev1.OffsetResetTopic{TopicID: sharestatev1.TopicID(topicA.String()), To: sharestatev1.OffsetResetToOffset, Offset: ptr.To[int64](500)})
	got := waitResetDone(t, sg, "reset-1")
	if r := got.Status.LastOffsetReset; r.StateEpoch != 5 || r.Partitions != 3 {
		t.Fatalf("reset status %+v, want state epoch 5 over 3 partitions", r)
	}
	for part := range int32(3) {
		obj := getSPS(t, spsKey(ns, "g", part))
		if obj.Status.StateEpoch != 5 || obj.Status.StartOffset != 500 || len(obj.Status.StateBatches) != 0 || obj.Status.LeaderEpoch != 7 {
			t.Fatalf("partition %d after reset (the leader epoch kept, semantics §5): %+v", part, obj.Status)
		}
		if w := write(old, "g", part, 4, 7, acked(12)); w.ErrorCode != sharestate.ErrFencedStateEpoch {
			t.Fatalf("old leader's write after reset: %s", w.ErrorCode)
		}
		r := read(old, "g", part, 7)
		if r.ErrorCode != sharestate.ErrNone || r.StateEpoch != 5 || r.StartOffset != 500 {
			t.Fatalf("reload after reset: %+v", r)
		}
	}
	eventFor(t, ns, sg.Name, sharestatev1.EventReasonOffsetReset)
	expectNoSecondRun(t, ns, sg, old)
	expectNewRequestRuns(t, ns, sg)
}

// expectNoSecondRun makes progress at the reset's epoch, then changes the spec without a new request:
// the reset must not run again.
func expectNoSecondRun(t *testing.T, ns string, sg *sharestatev1.ShareGroup, p *persister.Persister) {
	t.Helper()
	if w := write(p, "g", 0, 5, 7, acked(500)); w.ErrorCode != sharestate.ErrNone {
		t.Fatal(w.ErrorCode)
	}
	latest := getGroup(t, sg)
	latest.Spec.Settings = &sharestatev1.ShareGroupSettings{DeliveryCountLimit: ptr.To[int32](3)}
	if err := env.Client.Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, func() error {
		if g := getGroup(t, sg); g.Status.ObservedGeneration != latest.Generation {
			return fmt.Errorf("generation %d not observed yet", latest.Generation)
		}
		return nil
	})
	consistently(t, 2*time.Second, func() error {
		obj := getSPS(t, spsKey(ns, "g", 0))
		if obj.Status.StateEpoch != 5 || len(obj.Status.StateBatches) != 1 {
			return fmt.Errorf("the same request ran twice: %+v", obj.Status)
		}
		return nil
	})
}

// expectNewRequestRuns sends a second request, for one partition: it runs at the next epoch.
func expectNewRequestRuns(t *testing.T, ns string, sg *sharestatev1.ShareGroup) {
	t.Helper()
	requestReset(t, sg, "reset-2", sharestatev1.OffsetResetTopic{TopicID: sharestatev1.TopicID(topicA.String()), To: sharestatev1.OffsetResetToEarliest, Partitions: []int32{1}})
	got := waitResetDone(t, sg, "reset-2")
	if r := got.Status.LastOffsetReset; r.StateEpoch != 6 || r.Partitions != 1 {
		t.Fatalf("second reset %+v", r)
	}
	if obj := getSPS(t, spsKey(ns, "g", 1)); obj.Status.StateEpoch != 6 || obj.Status.StartOffset != 0 {
		t.Fatalf("partition 1 after the second reset: %+v", obj.Status)
	}
	if obj := getSPS(t, spsKey(ns, "g", 0)); obj.Status.StateEpoch != 5 {
		t.Fatalf("partition 0 was not named by the second reset: %+v", obj.Status)
	}
}

func TestOffsetResetOfAnUndeclaredTopicIsRefused(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg := declaredGroup(t, ns, "g", 2)
	requestReset(t, sg, "bad", sharestatev1.OffsetResetTopic{TopicID: "AAAAAAAAAAAAAAAAAAAAAQ", To: sharestatev1.OffsetResetToEarliest})
	testenv.Eventually(t, 10*time.Second, func() error {
		g := getGroup(t, sg)
		c := meta.FindStatusCondition(g.Status.Conditions, sharestatev1.ConditionOffsetReset)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != sharestatev1.ReasonResetUndeclaredTopic {
			return fmt.Errorf("condition %+v", c)
		}
		if g.Status.LastOffsetReset != nil {
			return fmt.Errorf("a refused reset was recorded: %+v", g.Status.LastOffsetReset)
		}
		return nil
	})
	eventFor(t, ns, sg.Name, sharestatev1.EventReasonOffsetResetRefused)
}

// A reset while leaders keep writing: once it is done, every partition holds the reset's state epoch
// and start offset, no write with the old state epoch lands after it, and the writers are fenced.
func TestOffsetResetWhileWritersAreActive(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	const partitions = 4
	sg, _, p := groupLedByOneBroker(t, ns, "g", partitions, 1)
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		fenced  atomic.Int32
		landed  atomic.Int64
		offsets [partitions]atomic.Int64
	)
	for part := range int32(partitions) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for offset := int64(1000); !stop.Load(); offset++ {
				w := write(p, "g", part, 1, 1, acked(offset))
				if w.ErrorCode == sharestate.ErrFencedStateEpoch {
					fenced.Add(1)
					return
				}
				if w.ErrorCode == sharestate.ErrNone {
					landed.Add(1)
					offsets[part].Store(offset)
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	requestReset(t, sg, "live", sharestatev1.OffsetResetTopic{TopicID: sharestatev1.TopicID(topicA.String()), To: sharestatev1.OffsetResetToOffset, Offset: ptr.To[int64](100)})
	waitResetDone(t, sg, "live")
	testenv.Eventually(t, 10*time.Second, func() error {
		if n := fenced.Load(); n != partitions {
			return fmt.Errorf("%d of %d writers fenced", n, partitions)
		}
		return nil
	})
	stop.Store(true)
	wg.Wait()
	t.Logf("%d writes landed before the reset", landed.Load())
	for part := range int32(partitions) {
		obj := getSPS(t, spsKey(ns, "g", part))
		if obj.Status.StateEpoch != 2 || obj.Status.StartOffset != 100 || len(obj.Status.StateBatches) != 0 {
			t.Fatalf("partition %d: a write with the old epoch landed after the reset: %+v", part, obj.Status)
		}
	}
}

// TestGroupStatusGathersPartitionChanges: a broker's death fences its partitions one by one, and the
// group's status follows with a write per pass, not per fence: passes caused by partition changes
// wait a second (partitionChangeDelay), so those of one delay share a pass. (The suite's totals refresh of 1 s
// adds a pass a second of its own.)
func TestGroupStatusGathersPartitionChanges(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	const partitions = 30
	sg, pod, _ := groupLedByOneBroker(t, ns, "g", partitions, 0)
	testenv.Eventually(t, 20*time.Second, func() error {
		if s := getGroup(t, sg).Status; s.PartitionsWithLeader != partitions {
			return fmt.Errorf("%d of %d partitions with a leader", s.PartitionsWithLeader, partitions)
		}
		return nil
	})
	watcher, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	followCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	writes := 0
	var began time.Time
	done := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		first := true
		done <- testenv.Follow(followCtx, watcher, &sharestatev1.ShareGroupList{}, ns, func(_ watch.EventType, o client.Object) bool {
			if first { // the list: the status before the fence
				first = false
				close(started)
				return false
			}
			writes++
			return o.(*sharestatev1.ShareGroup).Status.FencedPartitions == partitions
		})
	}()
	<-started
	began = time.Now()
	if err := env.Client.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("waiting for the group to show %d fenced partitions: %v", partitions, err)
	}
	elapsed := time.Since(began)
	// A pass per delay (partitionChangeDelay, 1 s) since the first fence, and one per refresh (at
	// least half the period, 0.5 s, after a pass), each writing the status at most once, and the
	// write that shows them all.
	bound := int(elapsed.Seconds()/1.0+elapsed.Seconds()/0.5) + 2
	t.Logf("%d status writes while %d partitions were fenced in %s (bound %d)", writes, partitions, elapsed.Round(time.Millisecond), bound)
	if writes > bound {
		t.Fatalf("the group's status was written %d times while %d partitions were fenced in %s, want at most %d",
			writes, partitions, elapsed.Round(time.Millisecond), bound)
	}
}
