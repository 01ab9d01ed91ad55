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
// and a rolling restart redelivers acknowledged records at a later delivery count with Kafka's own
// persister as with ours. Sometimes the tail of the batch in flight at a restart is handed out twice at
// one delivery count, with either persister, in 4.2.2 and 4.4.0 alike (2026-12-04, three runs each:
// Kafka's own 727 records in one 4.4.0 run and 505 in one 4.2.2 run; ours none with 4.4.0, 1,270 and
// 804 in two 4.2.2 runs). Both are counted and logged; only a lost record fails. Every run measures
// both persisters, so their counts can be read side by side.
func TestRollingRestart(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts systemOptions
	}{
		{"our persister", systemOptions{}},
		{"Kafka's own persister", systemOptions{noSidecars: true, noOperator: true}},
	} {
		t.Run(tc.name, func(t *testing.T) { rollingRestart(t, tc.opts) })
	}
}

func rollingRestart(t *testing.T, opts systemOptions) {
	s := startSystem(t, opts)
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
