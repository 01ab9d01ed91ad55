package main_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

var (
	topicA = sharestate.MustParseTopicID("q1Sh0o2QRbuBzMz8vEMbvQ")
	topicB = sharestate.MustParseTopicID("AAAAAAAAAAAAAAAAAAAAAQ")
)

// kafka is a franz-go client of one sidecar, sending kmsg requests to it directly, as a broker's
// share-state client does.
type kafka struct {
	t  testing.TB
	cl *kgo.Client
}

func newKafka(t testing.TB, addr string, opts ...kgo.Opt) *kafka {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &kafka{t: t, cl: cl}
}

// request sends req to the sidecar and returns its response, failing the test on a transport error.
func (k *kafka) request(req kmsg.Request) kmsg.Response {
	k.t.Helper()
	resp, err := k.requestErr(req)
	if err != nil {
		k.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

func (k *kafka) requestErr(req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return k.cl.SeedBrokers()[0].Request(ctx, req)
}

func (k *kafka) initialize(group string, partition, stateEpoch int32, start int64) kmsg.InitializeShareGroupStateResponseTopicPartition {
	k.t.Helper()
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = group
	req.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{
		{Partition: partition, StateEpoch: stateEpoch, StartOffset: start},
	}}}
	topics := k.request(req).(*kmsg.InitializeShareGroupStateResponse).Topics
	k.one(len(topics), func() int { return len(topics[0].Partitions) })
	return topics[0].Partitions[0]
}

func (k *kafka) read(group string, partition, leaderEpoch int32) kmsg.ReadShareGroupStateResponseTopicPartition {
	k.t.Helper()
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = group
	req.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{
		{Partition: partition, LeaderEpoch: leaderEpoch},
	}}}
	topics := k.request(req).(*kmsg.ReadShareGroupStateResponse).Topics
	k.one(len(topics), func() int { return len(topics[0].Partitions) })
	return topics[0].Partitions[0]
}

func (k *kafka) write(group string, p kmsg.WriteShareGroupStateRequestTopicPartition) kmsg.WriteShareGroupStateResponseTopicPartition {
	k.t.Helper()
	topics := k.request(writeRequestOf(group, p)).(*kmsg.WriteShareGroupStateResponse).Topics
	k.one(len(topics), func() int { return len(topics[0].Partitions) })
	return topics[0].Partitions[0]
}

func (k *kafka) remove(group string, partition int32) kmsg.DeleteShareGroupStateResponseTopicPartition {
	k.t.Helper()
	req := kmsg.NewPtrDeleteShareGroupStateRequest()
	req.GroupID = group
	req.Topics = []kmsg.DeleteShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.DeleteShareGroupStateRequestTopicPartition{{Partition: partition}}}}
	topics := k.request(req).(*kmsg.DeleteShareGroupStateResponse).Topics
	k.one(len(topics), func() int { return len(topics[0].Partitions) })
	return topics[0].Partitions[0]
}

func (k *kafka) summary(group string, partition, leaderEpoch int32) kmsg.ReadShareGroupStateSummaryResponseTopicPartition {
	k.t.Helper()
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = group
	req.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: topicA, Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{
		{Partition: partition, LeaderEpoch: leaderEpoch},
	}}}
	topics := k.request(req).(*kmsg.ReadShareGroupStateSummaryResponse).Topics
	k.one(len(topics), func() int { return len(topics[0].Partitions) })
	return topics[0].Partitions[0]
}

// one checks that a response answers one topic with one partition, as a one-partition request asks.
func (k *kafka) one(topics int, partitions func() int) {
	k.t.Helper()
	if topics != 1 {
		k.t.Fatalf("%d topics answered, want 1", topics)
	}
	if n := partitions(); n != 1 {
		k.t.Fatalf("%d partitions answered, want 1", n)
	}
}

// writeRequestOf is a Write request of one partition of topicA.
func writeRequestOf(group string, p kmsg.WriteShareGroupStateRequestTopicPartition) *kmsg.WriteShareGroupStateRequest {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = group
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{p}}}
	return req
}

// writeOf is a Write of one partition.
func writeOf(stateEpoch, leaderEpoch int32, start int64, complete int32, batches ...batch) kmsg.WriteShareGroupStateRequestTopicPartition {
	p := kmsg.NewWriteShareGroupStateRequestTopicPartition()
	p.StateEpoch, p.LeaderEpoch, p.StartOffset, p.DeliveryCompleteCount = stateEpoch, leaderEpoch, start, complete
	for _, b := range batches {
		p.StateBatches = append(p.StateBatches, kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			FirstOffset: b.first, LastOffset: b.last, DeliveryState: b.state, DeliveryCount: b.count,
		})
	}
	return p
}

// batch is a state batch as the spec's tables write it: (first–last, state, count).
type batch struct {
	first, last int64
	state       int8
	count       int16
}

func batchesOf(in []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch) []batch {
	out := make([]batch, len(in))
	for i, b := range in {
		out[i] = batch{b.FirstOffset, b.LastOffset, b.DeliveryState, b.DeliveryCount}
	}
	return out
}

// expectCode checks a partition's error code, printing its message when it is not the one wanted.
// (Messages are null exactly on success: TestInitialize checks that.)
func expectCode(t testing.TB, what string, code int16, msg *string, want sharestate.ErrorCode) {
	t.Helper()
	if code != int16(want) {
		m := "<null>"
		if msg != nil {
			m = *msg
		}
		t.Fatalf("%s: %s (%s), want %s", what, sharestate.ErrorCode(code), m, want)
	}
}
