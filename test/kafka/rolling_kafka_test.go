//go:build kafka

package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestRollingRestart restarts the three brokers one after another (a controlled shutdown, SIGTERM,
// then a start on the same data), each once the one before is back in every partition's in-sync
// replicas, while three share consumers run and records keep arriving between the restarts: nothing
// is lost, nothing accepted twice.
//
// Nothing lost is the promise; a record may come back: Kafka's share groups deliver at least once,
// and in Kafka 4.2.2 a rolling restart redelivers acknowledged records with Kafka's own persister
// too (one run: 3,714 of 18,000 accepted a second time at delivery count 2; ours 834 and 3,784 in
// two runs). A record accepted twice at the same delivery count is one acquisition handed out twice:
// with 4.2.2 Kafka's own persister does that too (the same test on Kafka's persister, no sidecars and
// no operator, handed out 613 records of one partition twice at delivery count 1 in one of three
// runs, as ours did: 803 and 804 records in one of three and one of four runs), the tail of the batch
// in flight at a restart; with 4.4.0 ours did it once in CI (803 records), where Kafka's own
// persister has not been run. Both are counted and logged; only a lost record fails.
func TestRollingRestart(t *testing.T) {
	s := startSystem(t, systemOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const (
		partitions = 3
		batch      = 6_000 // records produced before each restart, and once more after the last
		records    = 4 * batch
	)
	produceOrders(ctx, t, s, partitions, batch)
	var consumers []*kafkacluster.Consumer
	for i := range 3 {
		// A wait before each acknowledgement stretches a batch's consumption over the restart.
		c, err := s.clients.StartConsumerWith(fmt.Sprintf("consumer-%d", i), "orders", "orders-processors",
			kafkacluster.ConsumerOptions{Idle: 5 * time.Minute, AckDelay: 2 * time.Second, CommitTimeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
		t.Cleanup(c.Stop)
	}
	produced := batch
	for i, n := range s.cluster.Nodes {
		if i > 0 {
			if err := s.clients.Produce(ctx, "orders", batch); err != nil {
				t.Fatal(err)
			}
			produced += batch
		}
		// The restart begins while the consumers are in the middle of the latest batch.
		awaitAccepted(t, consumers, produced-batch+batch/10, 5*time.Minute)
		n.Stop()
		if err := n.Restart(3 * time.Minute); err != nil {
			t.Fatal(err)
		}
		awaitInSync(ctx, t, s, "orders", partitions)
		l, _ := collect(t, consumers)
		t.Logf("restarted %s; %d of %d records accepted", n.Name(), l.accepted(), produced)
	}
	if err := s.clients.Produce(ctx, "orders", batch); err != nil {
		t.Fatal(err)
	}
	awaitAccepted(t, consumers, records, 8*time.Minute)
	for _, c := range consumers {
		c.Stop()
	}
	l, failures := collect(t, consumers)
	t.Logf("acknowledgements whose commit failed during the restarts: %d", len(failures))
	checkNothingLost(t, l, partitions, records/partitions)
}

// checkNothingLost checks that every record of partitions × perPartition was accepted and that nothing
// outside them was delivered; it logs the records accepted again, at a later delivery count and at the
// same one.
func checkNothingLost(t *testing.T, l ledger, partitions int32, perPartition int64) {
	t.Helper()
	var problems []string
	again, sameCount := 0, 0
	for p := range partitions {
		for o := range perPartition {
			outs := l[record{p, o}]
			seen := map[int]bool{}
			accepted := 0
			for _, out := range outs {
				if out.Action != "ACCEPTED" && out.Action != "FAILED-ACCEPTED" {
					continue
				}
				accepted++
				if out.Action == "ACCEPTED" && seen[out.DeliveryCount] {
					sameCount++
				}
				seen[out.DeliveryCount] = true
			}
			switch {
			case accepted == 0:
				problems = append(problems, fmt.Sprintf("%d:%d never accepted (%v)", p, o, outs))
			case accepted > 1:
				again++
			}
		}
	}
	for r := range l {
		if r.partition >= partitions || r.offset >= perPartition {
			problems = append(problems, fmt.Sprintf("%d:%d was delivered but never produced", r.partition, r.offset))
		}
	}
	t.Logf("records accepted again at a later delivery count: %d", again)
	t.Logf("records accepted twice at one delivery count (Kafka %s): %d", kafkacluster.Version(), sameCount)
	if len(problems) > 0 {
		t.Fatalf("%d records lost or delivered but never produced; the first: %v", len(problems), problems[:min(10, len(problems))])
	}
}

// awaitInSync waits until every partition of topic has a leader and all three replicas in sync.
func awaitInSync(ctx context.Context, t *testing.T, s *system, topic string, partitions int) {
	t.Helper()
	testenv.Eventually(t, 3*time.Minute, func() error {
		parts, err := s.clients.Partitions(ctx, topic)
		if err != nil {
			return err
		}
		if len(parts) != partitions {
			return fmt.Errorf("%d partitions described, want %d", len(parts), partitions)
		}
		for p, info := range parts {
			if info.Leader < 0 || info.ISR != 3 {
				return fmt.Errorf("%s-%d: leader %d, %d replicas in sync", topic, p, info.Leader, info.ISR)
			}
		}
		return nil
	})
}
