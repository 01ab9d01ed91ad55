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

// TestSidecarRestartUnderProduce: the sidecar of the broker leading a partition is killed (SIGKILL)
// and started again while Kafka's own producer sends with acks=all (min.insync.replicas=2) and a
// share consumer consumes. All inter-broker traffic to that broker passes its proxy, the followers'
// fetches included, so while it is down the leader's acks=all sends wait; they must not fail for
// longer than the restart took, every acknowledged record must be there afterwards, and the share
// consumer accepts each of them once.
func TestSidecarRestartUnderProduce(t *testing.T) {
	s := startSystem(t, systemOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	const (
		partitions = 3
		produceFor = 60 * time.Second
		perSecond  = 200
		// A failure stretch may outlast the restart by what one produce round trip and its retry
		// backoff take on two busy cores.
		margin = 5 * time.Second
	)
	if _, err := s.clients.Setup(ctx, "orders", partitions, 3, "orders-processors"); err != nil {
		t.Fatal(err)
	}
	leaders, err := s.clients.Leaders(ctx, "orders")
	if err != nil {
		t.Fatal(err)
	}
	victim := s.cluster.Node(leaders[0])
	consumer, err := s.clients.StartConsumer("consumer", "orders", "orders-processors", 0, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(consumer.Stop)
	producer, err := s.clients.StartProduceLoop("producer", "orders", produceFor, perSecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Kill)

	// Records flow both ways before the kill: acknowledged to the producer, accepted by the consumer.
	awaitAcked(t, producer, 500, 2*time.Minute)
	awaitAccepted(t, []*kafkacluster.Consumer{consumer}, 100, 3*time.Minute)
	killedAt := time.Now()
	restart, err := victim.Sidecar.Restart(time.Minute)
	if err != nil {
		t.Fatalf("restarting %s's sidecar: %v", victim.Name(), err)
	}
	if !producer.Running() {
		t.Fatalf("the producer finished before %s's sidecar was ready again: the restart was not under produce", victim.Name())
	}
	t.Logf("killed %s's sidecar (the leader of partition 0) at %s; ready again after %v", victim.Name(), killedAt.Format(time.RFC3339Nano), restart)

	if !producer.Wait(produceFor + 3*time.Minute) {
		t.Fatalf("the producer did not finish; its log ends:\n%s", tail(producer.Log(), 3000))
	}
	res, err := producer.Result()
	if err != nil {
		t.Fatal(err)
	}
	checkProduced(t, res, restart, margin)
	checkConsumedAcked(t, consumer, res)
}

// awaitAcked waits until the producer has had want sends acknowledged.
func awaitAcked(t *testing.T, p *kafkacluster.Producer, want int, timeout time.Duration) {
	t.Helper()
	err := testenv.Poll(timeout, func() error {
		res, err := p.Result()
		if err != nil {
			return err
		}
		if len(res.Acked) < want {
			return fmt.Errorf("%d of %d sends acknowledged", len(res.Acked), want)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v; the producer (running %v) log ends:\n%s", err, p.Running(), tail(p.Log(), 3000))
	}
}

// checkProduced checks the producer's summary: every send answered, and no stretch of failures
// longer than the restart (plus margin).
func checkProduced(t *testing.T, res kafkacluster.ProduceResult, restart, margin time.Duration) {
	t.Helper()
	if !res.Done {
		t.Fatal("the producer printed no summary")
	}
	t.Logf("producer: %d sent, %d acknowledged, %d failed; longest stretch of failures %v, longest wait for an acknowledgement %v (the restart took %v)",
		res.Sent, res.AckedCount, res.Failed, res.LongestFailure, res.MaxAck, restart)
	for i, f := range res.Failures[:min(10, len(res.Failures))] {
		t.Logf("failed send %d: %s", i, f)
	}
	if res.AckedCount+res.Failed != res.Sent || int64(len(res.Acked)) != res.AckedCount {
		t.Errorf("%d sends, %d acknowledged (%d printed) and %d failed: some send was never answered",
			res.Sent, res.AckedCount, len(res.Acked), res.Failed)
	}
	if res.LongestFailure > restart+margin {
		t.Errorf("sends failed for %v in a row, longer than the sidecar's restart (%v) and %v", res.LongestFailure, restart, margin)
	}
}

// checkConsumedAcked waits until the consumer has accepted every acknowledged record, then checks that
// it accepted none twice, and that whatever it received beyond them is no more than the failed sends
// (a send that failed may still have been written: its outcome is unknown to the producer).
func checkConsumedAcked(t *testing.T, consumer *kafkacluster.Consumer, res kafkacluster.ProduceResult) {
	t.Helper()
	consumers := []*kafkacluster.Consumer{consumer}
	err := testenv.Poll(5*time.Minute, func() error {
		l, _ := collect(t, consumers)
		missing := 0
		var first record
		for _, pos := range res.Acked {
			if r := (record{pos.Partition, pos.Offset}); !hasAcceptance(l[r]) {
				if missing == 0 {
					first = r
				}
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acknowledged records not accepted, the first %d:%d", missing, len(res.Acked), first.partition, first.offset)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v; the consumer (running %v) log ends:\n%s", err, consumer.Running(), tail(consumer.Log(), 3000))
	}
	consumer.Stop()
	l, failures := collect(t, consumers)
	if len(failures) > 0 {
		t.Logf("acknowledgements that did not commit (their records were delivered again): %d, the first: %s", len(failures), failures[0])
	}
	acked := map[record]bool{}
	for _, pos := range res.Acked {
		acked[record{pos.Partition, pos.Offset}] = true
	}
	unacked := 0
	for r, outs := range l {
		n := 0
		for _, o := range outs {
			if o.Action == "ACCEPTED" {
				n++
			}
		}
		if n > 1 {
			t.Errorf("%d:%d accepted %d times: %v", r.partition, r.offset, n, outs)
		}
		if !acked[r] {
			unacked++
		}
	}
	if int64(unacked) > res.Failed {
		t.Errorf("%d records delivered that the producer never had acknowledged, more than its %d failed sends", unacked, res.Failed)
	}
	t.Logf("the consumer accepted %d records, every one of the %d acknowledged", l.accepted(), len(res.Acked))
}

// hasAcceptance reports whether outs hold an acceptance (one whose commit failed counts: see checkExactlyOnce).
func hasAcceptance(outs []kafkacluster.Outcome) bool {
	for _, o := range outs {
		if o.Action == "ACCEPTED" || o.Action == "FAILED-ACCEPTED" {
			return true
		}
	}
	return false
}
