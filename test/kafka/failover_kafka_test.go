//go:build kafka

package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestLeaderLoss is KAFKA-17002 in a real cluster: the broker leading a partition is killed (SIGKILL)
// while three share consumers run, and its Pod object deleted. The new leader reads the state from
// its sidecar and goes on; no record accepted before the kill is delivered again; the operator fences
// the partitions the dead broker was still recorded as leading, and only those.
func TestLeaderLoss(t *testing.T) {
	s := startSystem(t, systemOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const (
		partitions = 3
		records    = 30_000
	)
	topicID := produceOrders(ctx, t, s, partitions, records)
	leaders, err := s.clients.Leaders(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	victim := s.cluster.Node(leaders[0])
	var consumers []*kafkacluster.Consumer
	for i := range 3 {
		c, err := s.clients.StartConsumer(fmt.Sprintf("consumer-%d", i), "orders", "orders-processors", 0, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
		t.Cleanup(c.Stop)
	}
	awaitAccepted(t, consumers, records/10, 5*time.Minute)

	recordedBefore := recordedLeaders(t, s.ns, topicID)
	victim.Kill()
	before, _ := collect(t, consumers)
	t.Logf("killed %s, the leader of partition 0, with %d records accepted; recorded leaders: %v", victim.Name(), before.accepted(), recordedBefore)
	if err := suite.env.Client.Delete(ctx, victim.Sidecar.Pod); err != nil {
		t.Fatal(err)
	}

	awaitAccepted(t, consumers, records, 8*time.Minute)
	for _, c := range consumers {
		c.Stop()
	}
	l, _ := collect(t, consumers)
	checkExactlyOnce(t, l, partitions, records/partitions)
	checkNotDeliveredAgain(t, before, l)
	checkFencedOnlyAt(t, s.ns, topicID, victim.Name())
}

// checkNotDeliveredAgain checks that no record accepted in before was delivered again in after.
func checkNotDeliveredAgain(t *testing.T, before, after ledger) {
	t.Helper()
	redelivered := 0
	for r, outs := range after {
		acceptedBefore := false
		for _, o := range before[r] {
			acceptedBefore = acceptedBefore || o.Action == "ACCEPTED"
		}
		if acceptedBefore && len(outs) != len(before[r]) {
			t.Errorf("%d:%d was accepted before the failure and delivered again: %v", r.partition, r.offset, outs)
		}
		for _, o := range outs {
			if o.DeliveryCount > 1 {
				redelivered++
			}
		}
	}
	t.Logf("records delivered more than once (in flight at the failure): %d", redelivered)
}

// checkFencedOnlyAt checks that the operator fences what the pod named dead was still recorded as
// leading, and nothing that a live leader had taken over: a fenced partition names that pod.
func checkFencedOnlyAt(t *testing.T, ns, topicID, dead string) {
	t.Helper()
	// The operator fences what the dead broker's pod was still recorded as leading when it went, and
	// nothing that a live leader had taken over: a fenced partition names the victim's pod.
	testenv.Eventually(t, 2*time.Minute, func() error {
		for _, st := range mustPartitionStates(t, ns, topicID) {
			if l := st.Status.Leader; l != nil && l.PodName == dead && st.Status.FencedLeader == nil {
				return fmt.Errorf("partition %d is still recorded at the dead %s and not fenced", st.Spec.Partition, dead)
			}
		}
		return nil
	})
	for _, st := range mustPartitionStates(t, ns, topicID) {
		if f := st.Status.FencedLeader; f != nil && f.PodName != dead {
			t.Errorf("partition %d: the operator fenced %s, which is alive", st.Spec.Partition, f.PodName)
		}
	}
}

// recordedLeaders is each partition's recorded leader pod.
func recordedLeaders(t *testing.T, ns, topicID string) map[int32]string {
	t.Helper()
	out := map[int32]string{}
	for _, st := range mustPartitionStates(t, ns, topicID) {
		if st.Status.Leader != nil {
			out[st.Spec.Partition] = st.Status.Leader.PodName
		}
	}
	return out
}

func mustPartitionStates(t *testing.T, ns, topicID string) []sharestatev1.SharePartitionState {
	t.Helper()
	var states []sharestatev1.SharePartitionState
	testenv.Eventually(t, 30*time.Second, func() error {
		var err error
		states, err = partitionStates(ns, topicID)
		return err
	})
	return states
}

// TestRecordedLeaderIsTheSendingBroker: in proxy mode a broker's Read and Write reach the sidecar of
// the share coordinator of the key, usually another broker's; the leader recorded, and fenced by, is
// the broker that sent them. Deleting the pod of a broker that leads no partition of the topic fences
// nothing; deleting the pod of the partition's leader fences it at that pod.
func TestRecordedLeaderIsTheSendingBroker(t *testing.T) {
	s := startSystem(t, systemOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	topicID := produceOrders(ctx, t, s, 1, 1000)
	c, err := s.clients.StartConsumer("consumer", "orders", "orders-processors", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	awaitAccepted(t, []*kafkacluster.Consumer{c}, 1000, 5*time.Minute)
	c.Stop()
	leaders, err := s.clients.Leaders(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	leader := s.cluster.Node(leaders[0])
	st := mustPartitionStates(t, s.ns, topicID)
	if len(st) != 1 || st[0].Status.Leader == nil {
		t.Fatalf("want one SharePartitionState with a recorded leader, got %+v", st)
	}
	if got := st[0].Status.Leader; got.PodName != leader.Name() || got.BrokerID != leader.ID {
		t.Fatalf("recorded leader %s (broker %d); Kafka's leader of the partition is %s", got.PodName, got.BrokerID, leader.Name())
	}

	// The other brokers' pods go first: one of them may be the key's share coordinator, whose sidecar
	// answered the leader's requests, but neither leads the partition. Then the leader's pod goes. The
	// fence names the leader: had the coordinator been recorded, the first deletions would have fenced
	// the partition at the coordinator's pod.
	for _, n := range s.cluster.Nodes {
		if n.ID != leader.ID {
			if err := suite.env.Client.Delete(ctx, n.Sidecar.Pod); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := suite.env.Client.Delete(ctx, leader.Sidecar.Pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		f := mustPartitionStates(t, s.ns, topicID)[0].Status.FencedLeader
		if f == nil || f.PodName != leader.Name() {
			return fmt.Errorf("the partition is not fenced at %s: %+v", leader.Name(), f)
		}
		return nil
	})
}
