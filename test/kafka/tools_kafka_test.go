//go:build kafka

package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestKafkaToolsOnOurState runs Kafka's own kafka-share-groups.sh against share state kept in
// SharePartitionStates: --describe --offsets shows the start offsets they hold (ReadShareGroupStateSummary);
// --reset-offsets on a group without members re-delivers from where it says, twice in a row (two
// Initializes at an equal state epoch); --delete removes the group's SharePartitionStates.
func TestKafkaToolsOnOurState(t *testing.T) {
	s := startSystem(t, systemOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const (
		group      = "orders-processors"
		partitions = 3
		records    = 3000
	)
	topicID := produceOrders(ctx, t, s, partitions, records)
	consumeAll(t, s, "first", records)
	awaitDeliveredUpTo(t, s.ns, topicID, partitions, records/partitions)

	// --describe --offsets: the start offsets the SharePartitionStates hold.
	described := describeStartOffsets(t, s, group)
	for _, st := range mustPartitionStates(t, s.ns, topicID) {
		if got := described[st.Spec.Partition]; got != st.Status.StartOffset {
			t.Errorf("partition %d: kafka-share-groups.sh shows start offset %d, the SharePartitionState holds %d",
				st.Spec.Partition, got, st.Status.StartOffset)
		}
	}

	// --reset-offsets --to-earliest, then --to-latest with no member change between: Initialize at an
	// equal state epoch, which Kafka carries out.
	epochBefore := mustPartitionStates(t, s.ns, topicID)[0].Status.StateEpoch
	awaitNoMembers(t, s, group)
	resetOffsets(t, s, group, "--to-earliest")
	awaitStartOffsets(t, s, topicID, 0)
	resetOffsets(t, s, group, "--to-latest")
	awaitStartOffsets(t, s, topicID, records/partitions)
	resetOffsets(t, s, group, "--to-earliest")
	awaitStartOffsets(t, s, topicID, 0)
	t.Logf("state epoch before the resets %d, after %d", epochBefore, mustPartitionStates(t, s.ns, topicID)[0].Status.StateEpoch)
	l := consumeAll(t, s, "after-reset", records)
	for r, outs := range l {
		if outs[0].DeliveryCount != 1 {
			t.Errorf("%d:%d after the reset: delivery count %d, want 1 (a fresh state)", r.partition, r.offset, outs[0].DeliveryCount)
		}
	}

	// --delete: the group's state goes.
	awaitNoMembers(t, s, group)
	if out, err := s.clients.ShareGroups(ctx, "--delete", "--group", group); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("kafka-share-groups.sh --delete:\n%s", out)
	}
	testenv.Eventually(t, time.Minute, func() error {
		if n := len(mustPartitionStates(t, s.ns, topicID)); n != 0 {
			return fmt.Errorf("%d SharePartitionStates left after --delete", n)
		}
		return nil
	})
	if answered := shareStateRequests(t, s.cluster); answered["DeleteShareGroupState"] == 0 || answered["ReadShareGroupStateSummary"] == 0 {
		t.Errorf("the sidecars answered no Delete or no ReadSummary: %v", answered)
	}
}

// consumeAll runs one share consumer until it has accepted want records, and stops it.
func consumeAll(t *testing.T, s *system, name string, want int) ledger {
	t.Helper()
	c, err := s.clients.StartConsumer(name, "orders", "orders-processors", 0, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	awaitAccepted(t, []*kafkacluster.Consumer{c}, want, 5*time.Minute)
	c.Stop()
	l, _ := collect(t, []*kafkacluster.Consumer{c})
	return l
}

// describeStartOffsets runs kafka-share-groups.sh --describe --offsets and returns the start offset
// it shows for each partition of orders.
func describeStartOffsets(t *testing.T, s *system, group string) map[int32]int64 {
	t.Helper()
	out, err := s.clients.ShareGroups(context.Background(), "--describe", "--offsets", "--group", group)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kafka-share-groups.sh --describe --offsets:\n%s", out)
	offsets := kafkacluster.StartOffsets(out, group)["orders"]
	if len(offsets) == 0 {
		t.Fatalf("no start offsets in kafka-share-groups.sh's output")
	}
	return offsets
}

// awaitNoMembers waits until the group has no members: Kafka resets and deletes only such groups.
func awaitNoMembers(t *testing.T, s *system, group string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		out, err := s.clients.ShareGroups(context.Background(), "--describe", "--members", "--group", group)
		if err != nil {
			return err
		}
		if strings.Contains(out, "has no active members") || !strings.Contains(out, "CONSUMER-ID") {
			return nil
		}
		return fmt.Errorf("the group still has members:\n%s", out)
	})
}

// resetOffsets runs kafka-share-groups.sh --reset-offsets with how (--to-earliest, --to-latest) on
// topic orders, --execute.
func resetOffsets(t *testing.T, s *system, group, how string) {
	t.Helper()
	out, err := s.clients.ShareGroups(context.Background(), "--reset-offsets", how, "--execute", "--topic", "orders", "--group", group)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kafka-share-groups.sh --reset-offsets %s:\n%s", how, out)
}

// awaitStartOffsets waits until kafka-share-groups.sh and the SharePartitionStates both show start
// offset want for every partition of orders.
func awaitStartOffsets(t *testing.T, s *system, topicID string, want int64) {
	t.Helper()
	testenv.Eventually(t, time.Minute, func() error {
		for _, st := range mustPartitionStates(t, s.ns, topicID) {
			if st.Status.StartOffset != want {
				return fmt.Errorf("partition %d: start offset %d, want %d", st.Spec.Partition, st.Status.StartOffset, want)
			}
		}
		return nil
	})
}
