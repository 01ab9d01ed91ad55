//go:build kafka

package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// TestShareConsumersThroughSidecars: three of Kafka's share consumers of one group consume 30,000
// records of a topic of 3 partitions (replication factor 3) from brokers whose share state lives in
// SharePartitionStates: each record accepted exactly once, a released share redelivered with delivery
// count 2, the start offsets at the end, and nothing in __share_group_state.
func TestShareConsumersThroughSidecars(t *testing.T) {
	s := startSystem(t, systemOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const (
		partitions   = 3
		records      = 30_000
		releaseEvery = 100
	)
	topicID := produceOrders(ctx, t, s, partitions, records)
	var consumers []*kafkacluster.Consumer
	for i := range 3 {
		c, err := s.clients.StartConsumer("consumer-"+string(rune('a'+i)), "orders", "orders-processors", releaseEvery, 5*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		consumers = append(consumers, c)
		t.Cleanup(c.Stop)
	}
	awaitAccepted(t, consumers, records, 8*time.Minute)
	for _, c := range consumers {
		c.Stop()
	}
	l, failures := collect(t, consumers)
	if len(failures) > 0 {
		t.Logf("acknowledgements that did not commit (their records were delivered again): %d, the first: %s", len(failures), failures[0])
	}
	checkExactlyOnce(t, l, partitions, records/partitions)

	released := 0
	for r, outs := range l {
		if r.offset%releaseEvery != 0 {
			continue
		}
		released++
		if len(outs) != 2 || outs[0].Action != "RELEASED" || outs[0].DeliveryCount != 1 ||
			outs[1].Action != "ACCEPTED" || outs[1].DeliveryCount != 2 {
			t.Errorf("%d:%d: want released at delivery 1, then accepted at delivery 2; got %v", r.partition, r.offset, outs)
		}
	}
	if released == 0 {
		t.Error("no record was released")
	}

	awaitDeliveredUpTo(t, s.ns, topicID, partitions, records/partitions)
	checkNoStateInKafka(t, s.cluster)
	answered := shareStateRequests(t, s.cluster)
	t.Logf("share-state requests the proxies answered: %v", answered)
	for _, api := range []string{"InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState"} {
		if answered[api] == 0 {
			t.Errorf("the sidecars answered no %s request", api)
		}
	}
}
