package persister_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

var (
	topicA = sharestate.MustParseTopicID("q1Sh0o2QRbuBzMz8vEMbvQ")
	topicB = sharestate.MustParseTopicID("AAAAAAAAAAAAAAAAAAAAAQ")
)

// newPersister returns a persister for broker id with a client (and so a connection and a cache) of
// its own.
func newPersister(t testing.TB, ns string, broker int32) *persister.Persister {
	t.Helper()
	return newPersisterWithConfig(t, env.Config, ns, broker)
}

func newPersisterWithConfig(t testing.TB, cfg *rest.Config, ns string, broker int32) *persister.Persister {
	t.Helper()
	cfg = rest.CopyConfig(cfg)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	p, err := persister.New(persister.Options{
		Client: c, Namespace: ns,
		Identity:         persister.Identity{BrokerID: broker, PodName: podName(broker), PodUID: "uid-" + podName(broker)},
		OperationTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podName(broker int32) string { return "broker-" + string(rune('0'+broker)) }

// one builds a request for one partition of topicA.
func one[P any](group string, in P) sharestate.Request[P] {
	return sharestate.Request[P]{GroupID: group, Topics: []sharestate.TopicData[P]{{TopicID: topicA, Partitions: []P{in}}}}
}

func only[R any](t testing.TB, resp sharestate.Response[R]) R {
	t.Helper()
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("want one partition's answer, got %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func initialize(t testing.TB, p *persister.Persister, group string, partition, stateEpoch int32, start int64) sharestate.PartitionResult {
	t.Helper()
	return only(t, p.Initialize(context.Background(), one(group, sharestate.InitializePartition{Partition: partition, StateEpoch: stateEpoch, StartOffset: start})))
}

func read(t testing.TB, p *persister.Persister, group string, partition, leaderEpoch int32) sharestate.ReadResult {
	t.Helper()
	return only(t, p.Read(context.Background(), one(group, sharestate.ReadPartition{Partition: partition, LeaderEpoch: leaderEpoch})))
}

func write(t testing.TB, p *persister.Persister, group string, in sharestate.WritePartition) sharestate.PartitionResult {
	t.Helper()
	return only(t, p.Write(context.Background(), one(group, in)))
}

func summary(t testing.TB, p *persister.Persister, group string, partition int32) sharestate.ReadSummaryResult {
	t.Helper()
	return only(t, p.ReadSummary(context.Background(), one(group, sharestate.ReadSummaryPartition{Partition: partition})))
}

func remove(t testing.TB, p *persister.Persister, group string, partition int32) sharestate.PartitionResult {
	t.Helper()
	return only(t, p.Delete(context.Background(), one(group, sharestate.DeletePartition{Partition: partition})))
}

func expectCode(t testing.TB, what string, got sharestate.PartitionResult, want sharestate.ErrorCode) {
	t.Helper()
	if got.ErrorCode != want {
		t.Fatalf("%s: got %s (%q), want %s", what, got.ErrorCode, got.ErrorMessage, want)
	}
}

func batch(first, last int64, state sharestate.DeliveryState, count int16) sharestate.StateBatch {
	return sharestate.StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: count}
}

var _ = testenv.Require
