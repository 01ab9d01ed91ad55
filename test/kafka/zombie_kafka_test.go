//go:build kafka

package kafka

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestZombieLeader is the seed's case with a real broker: the leader of a partition is paused
// (SIGSTOP) with acknowledgements in flight to it, until the controller has moved its leadership
// and the new leader has read the state through its sidecar; then it resumes (SIGCONT). Its Write at
// the old leader epoch is answered FENCED_LEADER_EPOCH (its log says the Write failed), and nothing it
// held overwrites the new leader's state.
func TestZombieLeader(t *testing.T) {
	s := startSystem(t, systemOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const records = 8_000
	topicID := produceOrders(ctx, t, s, 1, records)
	leaders, err := s.clients.Leaders(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	zombie := s.cluster.Node(leaders[0])
	// Each poll's records wait 2 s before their acknowledgement, and a commit gives up after 5 s: the
	// pause catches acknowledgements in flight to the zombie, and the consumer goes on to the new
	// leader without waiting for them.
	c, err := s.clients.StartConsumerWith("consumer", "orders", "orders-processors",
		kafkacluster.ConsumerOptions{Idle: 5 * time.Minute, AckDelay: 2 * time.Second, CommitTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	consumers := []*kafkacluster.Consumer{c}
	awaitAccepted(t, consumers, 1000, 5*time.Minute)

	if err := zombie.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = zombie.Resume() })
	before, _ := collect(t, consumers)
	fencedBefore := fencedWrites(t, s.cluster)
	t.Logf("paused %s, the leader of orders-0, with %d records accepted", zombie.Name(), before.accepted())
	newLeader := awaitNewLeader(ctx, t, s, zombie.ID)
	awaitRecordedLeader(t, s.ns, topicID, s.cluster.Node(newLeader).Name())
	if err := zombie.Resume(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s leads orders-0 and has read its state; %s resumed", s.cluster.Node(newLeader).Name(), zombie.Name())

	awaitAccepted(t, consumers, records, 8*time.Minute)
	c.Stop()
	l, failures := collect(t, consumers)
	// What the consumer was told of its commits after the pause: read beside a failure of the check.
	t.Logf("the consumer's failed commits and errors: %d; the first: %v", len(failures), failures[:min(5, len(failures))])
	checkAcceptanceKept(t, l, records)
	checkNotDeliveredAgain(t, before, l)

	st := mustPartitionStates(t, s.ns, topicID)[0]
	if st.Status.Leader == nil || st.Status.Leader.PodName == zombie.Name() {
		t.Errorf("the recorded leader is %+v; the zombie %s must not lead again", st.Status.Leader, zombie.Name())
	}
	testenv.Eventually(t, time.Minute, func() error {
		// The zombie's log says its Write failed: SharePartitionManager's line when an acknowledgement's
		// Write is answered fenced, or SharePartition's when the Write of an acquisition lock's timeout
		// is (kafka_2.13 4.4.0 and 4.2.2, kafka/server/share/SharePartitionManager.class and
		// SharePartition.class, read with javap; which one depends on what the zombie does first).
		if !fencedLine.MatchString(zombie.Log()) {
			return fmt.Errorf("%s's log does not say that its share partition's Write failed", zombie.Name())
		}
		return nil
	})
	if fenced := fencedWrites(t, s.cluster) - fencedBefore; fenced == 0 {
		t.Error("the sidecars answered no Write FENCED_LEADER_EPOCH or FENCED_STATE_EPOCH after the zombie resumed")
	} else {
		t.Logf("Writes answered fenced after the pause: %v", fenced)
	}
}

// checkAcceptanceKept checks partition 0's records after the zombie's pause: each accepted, and no
// acceptance lost, that is no record delivered again at a higher delivery count after an acceptance
// that succeeded (the signature of a zombie's state overwriting the new leader's). A record accepted
// twice at one delivery count is what a leader change does to the batch in flight at the old leader,
// with Kafka's own persister as with ours (the rolling-restart test, checkNothingLost): the old
// leader's acquisition was never stored, so the new leader hands the record out at the same count.
// Those are logged and must be one run of offsets, the one batch in flight.
func checkAcceptanceKept(t *testing.T, l ledger, records int64) {
	t.Helper()
	var problems []string
	var twice []int64
	for o := range records {
		outs := l[record{0, o}]
		accepted, unknown := map[int]int{}, 0
		for _, out := range outs {
			switch out.Action {
			case "ACCEPTED":
				accepted[out.DeliveryCount]++
			case "FAILED-ACCEPTED":
				unknown++
			}
		}
		switch {
		case len(accepted)+unknown == 0:
			problems = append(problems, fmt.Sprintf("0:%d never accepted (%v)", o, outs))
		case len(accepted) > 1:
			problems = append(problems, fmt.Sprintf("0:%d accepted and delivered again at a later count (%v)", o, outs))
		case maxCount(accepted) > 1:
			twice = append(twice, o)
		}
	}
	for r := range l {
		if r.partition != 0 || r.offset >= records {
			problems = append(problems, fmt.Sprintf("%d:%d was delivered but never produced", r.partition, r.offset))
		}
	}
	if n := len(twice); n > 0 {
		t.Logf("records accepted twice at one delivery count (the batch in flight at the leader change): %d, offsets %d to %d", n, twice[0], twice[n-1])
		if twice[n-1]-twice[0] != int64(n-1) {
			problems = append(problems, fmt.Sprintf("the records accepted twice at one delivery count are not one batch: %v", twice[:min(20, n)]))
		}
	}
	if len(problems) > 0 {
		t.Fatalf("%d problems; the first: %s", len(problems), strings.Join(problems[:min(10, len(problems))], "; "))
	}
}

func maxCount(accepted map[int]int) int {
	m := 0
	for _, n := range accepted {
		m = max(m, n)
	}
	return m
}

var fencedLine = regexp.MustCompile(`The share partition with key .*orders-0.* is fenced|Failed to write the share group state for share partition: .*:orders-0`)

// awaitNewLeader waits until a broker other than old leads orders-0, and returns it. It asks the
// other brokers only: an Admin client that picks the paused one waits out its timeouts.
func awaitNewLeader(ctx context.Context, t *testing.T, s *system, old int32) int32 {
	t.Helper()
	var live []string
	for _, n := range s.cluster.Nodes {
		if n.ID != old {
			live = append(live, n.ClientAddress)
		}
	}
	clients := s.clients
	clients.Bootstrap = strings.Join(live, ",")
	var leader int32 = -1
	testenv.Eventually(t, 3*time.Minute, func() error {
		leaders, err := clients.Leaders(ctx, "orders")
		if err != nil {
			return err
		}
		if leader = leaders[0]; leader == old || leader < 0 {
			return fmt.Errorf("orders-0 is still led by %d", leader)
		}
		return nil
	})
	return leader
}

// awaitRecordedLeader waits until the partition's SharePartitionState records pod as its leader: the
// new leader has read the state.
func awaitRecordedLeader(t *testing.T, ns, topicID, pod string) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		st := mustPartitionStates(t, ns, topicID)[0]
		if st.Status.Leader == nil || st.Status.Leader.PodName != pod {
			return fmt.Errorf("recorded leader %+v, want %s", st.Status.Leader, pod)
		}
		return nil
	})
}

// fencedWrites sums, over every sidecar, the Writes answered FENCED_LEADER_EPOCH or FENCED_STATE_EPOCH.
func fencedWrites(t *testing.T, c *kafkacluster.Cluster) float64 {
	t.Helper()
	const series = `sharestate_sidecar_requests_total{api="WriteShareGroupState",error="%s"}`
	return sidecarMetricSum(t, c, fmt.Sprintf(series, "FENCED_LEADER_EPOCH")) +
		sidecarMetricSum(t, c, fmt.Sprintf(series, "FENCED_STATE_EPOCH"))
}
