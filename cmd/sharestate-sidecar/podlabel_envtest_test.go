package main_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

func createPod(t *testing.T, ns, name string, labels map[string]string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "apache/kafka"}}},
	}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestSidecarLabelsItsPodAndRecordsTheSendingBroker: the sidecar, with only its generated role,
// labels its own pod with its broker id, keeping the pod's other labels, and a Write
// another broker's persister sends it ("Persister-client-7", as Kafka's does) records that broker's
// pod, found by the same label, as the partition's leader.
func TestSidecarLabelsItsPodAndRecordsTheSendingBroker(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	ctx := context.Background()
	own := createPod(t, ns, "broker-3", map[string]string{"app": "kafka"})
	s := startSidecar(t, ns, sidecarOptions{brokerID: 3}) // in pod broker-3

	// A bound on failure only: under load the role binding and the sidecar's retries (backing off to
	// 10 s) took up to 27 s.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var got corev1.Pod
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), &got); err != nil {
			t.Fatal(err)
		}
		if got.Labels[sharestatev1.LabelBrokerID] == "3" && got.Labels["app"] == "kafka" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar did not label its pod: labels %v\n%s", got.Labels, s.logs)
		}
		time.Sleep(100 * time.Millisecond)
	}

	other := createPod(t, ns, "kafka-7", map[string]string{sharestatev1.LabelBrokerID: "7"})
	const group = "orders"
	topic := sharestate.MustParseTopicID("q1Sh0o2QRbuBzMz8vEMbvQ")
	direct := newWireClient(t, s.addr)
	init := direct.Initialize(ctx, sharestate.InitializeRequest{GroupID: group, Topics: []sharestate.TopicData[sharestate.InitializePartition]{
		{TopicID: topic, Partitions: []sharestate.InitializePartition{{Partition: 0, StateEpoch: 1}}}}})
	if code := init.Topics[0].Partitions[0].ErrorCode; code != sharestate.ErrNone {
		t.Fatalf("initialize: %s", code)
	}
	from7 := newWireClientOpts(t, kafkawire.ClientOptions{Address: s.addr, ClientID: "Persister-client-7"})
	w := from7.Write(ctx, sharestate.WriteRequest{GroupID: group, Topics: []sharestate.TopicData[sharestate.WritePartition]{
		{TopicID: topic, Partitions: []sharestate.WritePartition{{Partition: 0, StateEpoch: 1, LeaderEpoch: 2, StartOffset: 0, DeliveryCompleteCount: -1}}}}})
	if r := w.Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("write sent by broker 7: %s (%s)\n%s", r.ErrorCode, r.ErrorMessage, s.logs)
	}
	var sps sharestatev1.SharePartitionState
	key := client.ObjectKey{Namespace: ns, Name: sharestatev1.SharePartitionStateName(group, topic.String(), 0)}
	if err := env.Client.Get(ctx, key, &sps); err != nil {
		t.Fatal(err)
	}
	if l := sps.Status.Leader; l == nil || l.BrokerID != 7 || l.PodName != "kafka-7" || l.PodUID != string(other.UID) {
		t.Fatalf("recorded leader %+v, want broker 7 in pod kafka-7 (uid %s)", l, other.UID)
	}
}
