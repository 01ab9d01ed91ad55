package main_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// newPersister is the in-process Store, in namespace ns, as broker id 1.
func newPersister(t testing.TB, ns string) *persister.Persister {
	t.Helper()
	c, err := client.New(rest.CopyConfig(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	p, err := persister.New(persister.Options{Client: c, Namespace: ns, Identity: persister.Identity{BrokerID: 1, PodName: "broker-1", PodUID: "uid-1"}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// newWireClient is the Store over the wire: kafkawire.Client of a sidecar.
func newWireClient(t testing.TB, addr string) *kafkawire.Client {
	t.Helper()
	return newWireClientOpts(t, kafkawire.ClientOptions{Address: addr})
}

func newWireClientOpts(t testing.TB, opts kafkawire.ClientOptions) *kafkawire.Client {
	t.Helper()
	c, err := kafkawire.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// The one Store interface, two implementations: the same script of operations, run against the
// in-process persister and against kafkawire.Client through the sidecar (each in a namespace of its
// own), gets the same answers, to the last field and message.
func TestClientAnswersLikeThePersister(t *testing.T) {
	testenv.Require(t, env)
	local := newPersister(t, env.Namespace(t))
	nsWire := env.Namespace(t)
	wire := newWireClient(t, startSidecar(t, nsWire, sidecarOptions{}).addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	for i, step := range storeScript() {
		got, want := step.run(ctx, wire), step.run(ctx, local)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d (%s):\nover the wire %+v\n  in process %+v", i, step.name, got, want)
		}
	}
}

type storeStep struct {
	name string
	run  func(context.Context, sharestate.Store) any
}

func storeScript() []storeStep {
	two := func(a, b int32) []sharestate.TopicData[sharestate.InitializePartition] {
		return []sharestate.TopicData[sharestate.InitializePartition]{
			{TopicID: topicA, Partitions: []sharestate.InitializePartition{{Partition: a, StateEpoch: 1, StartOffset: 10}, {Partition: -1, StateEpoch: 1}}},
			{TopicID: topicB, Partitions: []sharestate.InitializePartition{{Partition: b, StateEpoch: 2, StartOffset: -1}}},
		}
	}
	write := func(stateEpoch, leaderEpoch int32, start int64, complete int32, batches ...sharestate.StateBatch) sharestate.WriteRequest {
		return one("g", sharestate.WritePartition{Partition: 0, StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch, StartOffset: start, DeliveryCompleteCount: complete, StateBatches: batches})
	}
	acked := func(first, last int64) sharestate.StateBatch {
		return sharestate.StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: sharestate.DeliveryStateAcknowledged, DeliveryCount: 1}
	}
	return []storeStep{
		{"read uninitialized", func(ctx context.Context, s sharestate.Store) any {
			return s.Read(ctx, one("g", sharestate.ReadPartition{Partition: 0, LeaderEpoch: 1}))
		}},
		{"initialize two topics", func(ctx context.Context, s sharestate.Store) any {
			return s.Initialize(ctx, sharestate.InitializeRequest{GroupID: "g", Topics: two(0, 5)})
		}},
		{"read", func(ctx context.Context, s sharestate.Store) any {
			return s.Read(ctx, one("g", sharestate.ReadPartition{Partition: 0, LeaderEpoch: 2}))
		}},
		{"write", func(ctx context.Context, s sharestate.Store) any {
			return s.Write(ctx, write(1, 2, 10, 3, acked(10, 12), acked(14, 14)))
		}},
		{"write, fenced leader", func(ctx context.Context, s sharestate.Store) any {
			return s.Write(ctx, write(1, 1, 10, -1, acked(13, 13)))
		}},
		{"write, fenced state", func(ctx context.Context, s sharestate.Store) any { return s.Write(ctx, write(0, 2, 10, -1)) }},
		{"write, invalid batch", func(ctx context.Context, s sharestate.Store) any {
			return s.Write(ctx, write(1, 2, 10, -1, sharestate.StateBatch{FirstOffset: 5, LastOffset: 4}))
		}},
		{"read after writes", func(ctx context.Context, s sharestate.Store) any {
			return s.Read(ctx, one("g", sharestate.ReadPartition{Partition: 0, LeaderEpoch: 2}))
		}},
		{"summary", func(ctx context.Context, s sharestate.Store) any {
			return s.ReadSummary(ctx, one("g", sharestate.ReadSummaryPartition{Partition: 0}))
		}},
		{"reset", func(ctx context.Context, s sharestate.Store) any {
			return s.Initialize(ctx, one("g", sharestate.InitializePartition{Partition: 0, StateEpoch: 3, StartOffset: 20}))
		}},
		{"delete", func(ctx context.Context, s sharestate.Store) any {
			return s.Delete(ctx, one("g", sharestate.DeletePartition{Partition: 0}))
		}},
		{"summary after delete", func(ctx context.Context, s sharestate.Store) any {
			return s.ReadSummary(ctx, one("g", sharestate.ReadSummaryPartition{Partition: 0}))
		}},
		{"write after delete", func(ctx context.Context, s sharestate.Store) any { return s.Write(ctx, write(3, 2, 20, -1)) }},
	}
}
