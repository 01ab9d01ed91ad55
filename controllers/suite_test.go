package controllers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// env is the control plane the tests share, with the operator's manager running against it (nil with
// -short). Each test works in a namespace of its own.
var env *testenv.Env

// notReadyGrace is the manager's --fence-not-ready-after in these tests.
const notReadyGrace = 3 * time.Second

// resyncPeriod is the manager's --partition-resync-period in these tests: short, so that what only
// the resync finds (and the conditions and events it refreshes) shows within the tests' waits.
const resyncPeriod = time.Second

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env = e
		if e == nil {
			return nil
		}
		return startOperator(e.Config)
	}))
}

// startOperator runs the operator's manager; the returned function stops it and waits.
func startOperator(cfg *rest.Config) func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := operator.NewManager(ctx, cfg, operator.Options{
		MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		NotReadyGrace: notReadyGrace, TotalsRefresh: time.Second, PartitionResync: resyncPeriod,
	})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// zapLevel keeps the operator's logs quiet unless SHARESTATE_TEST_VERBOSE is set.
func zapLevel() zapcore.Level {
	if os.Getenv("SHARESTATE_TEST_VERBOSE") != "" {
		return -4
	}
	return 2
}

var (
	topicA = sharestate.MustParseTopicID("q1Sh0o2QRbuBzMz8vEMbvQ")
	ctx    = context.Background()
)

// brokerPod creates a broker pod; ready sets its Ready condition True (else False since now).
func brokerPod(t *testing.T, ns, name string, ready bool) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "kafka"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// persisterFor returns a persister standing for the broker in pod (uid overrides the pod's UID).
func persisterFor(t *testing.T, ns string, broker int32, pod *corev1.Pod, uid string) *persister.Persister {
	t.Helper()
	c, err := client.New(rest.CopyConfig(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if uid == "" {
		uid = string(pod.UID)
	}
	p, err := persister.New(persister.Options{Client: c, Namespace: ns,
		Identity: persister.Identity{BrokerID: broker, PodName: pod.Name, PodUID: uid}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func one[P any](group string, in P) sharestate.Request[P] {
	return sharestate.Request[P]{GroupID: group, Topics: []sharestate.TopicData[P]{{TopicID: topicA, Partitions: []P{in}}}}
}

func first[R any](resp sharestate.Response[R]) R { return resp.Topics[0].Partitions[0] }

func initialize(t *testing.T, p *persister.Persister, group string, partition, epoch int32, start int64) {
	t.Helper()
	res := first(p.Initialize(ctx, one(group, sharestate.InitializePartition{Partition: partition, StateEpoch: epoch, StartOffset: start})))
	if res.ErrorCode != sharestate.ErrNone {
		t.Fatalf("initialize: %s %s", res.ErrorCode, res.ErrorMessage)
	}
}

func read(p *persister.Persister, group string, partition, leaderEpoch int32) sharestate.ReadResult {
	return first(p.Read(ctx, one(group, sharestate.ReadPartition{Partition: partition, LeaderEpoch: leaderEpoch})))
}

func write(p *persister.Persister, group string, partition, stateEpoch, leaderEpoch int32, batches ...sharestate.StateBatch) sharestate.PartitionResult {
	return first(p.Write(ctx, one(group, sharestate.WritePartition{Partition: partition, StateEpoch: stateEpoch,
		LeaderEpoch: leaderEpoch, StartOffset: -1, DeliveryCompleteCount: -1, StateBatches: batches})))
}

func acked(offset int64) sharestate.StateBatch {
	return sharestate.StateBatch{FirstOffset: offset, LastOffset: offset, DeliveryState: sharestate.DeliveryStateAcknowledged, DeliveryCount: 1}
}

func spsKey(ns, group string, partition int32) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: sharestatev1.SharePartitionStateName(group, topicA.String(), partition)}
}

func getSPS(t *testing.T, key client.ObjectKey) *sharestatev1.SharePartitionState {
	t.Helper()
	var obj sharestatev1.SharePartitionState
	testenv.Get(t, env.Client, key, &obj) // a read that fails for a moment is no verdict
	return &obj
}

// consistently checks cond every 100 ms for the whole duration.
func consistently(t *testing.T, duration time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(duration)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// eventFor waits for an Event with reason about the object named name.
func eventFor(t *testing.T, ns, name, reason string) *eventsv1.Event {
	t.Helper()
	var found *eventsv1.Event
	testenv.Eventually(t, 10*time.Second, func() error {
		var list eventsv1.EventList
		if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for i := range list.Items {
			if list.Items[i].Regarding.Name == name && list.Items[i].Reason == reason {
				found = &list.Items[i]
				return nil
			}
		}
		return fmt.Errorf("no %s event for %s among %d", reason, name, len(list.Items))
	})
	return found
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
