package persister_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// stallSwitch stands for an API server that stops answering: while it is on, every request of a
// client built from its config hangs until the request's context ends.
type stallSwitch struct{ on atomic.Bool }

func (s *stallSwitch) config() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if s.on.Load() {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			return rt.RoundTrip(r)
		})
	}
	return cfg
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme, Mapper: env.Client.RESTMapper()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newPersisterWithOptions(t *testing.T, opts persister.Options) *persister.Persister {
	t.Helper()
	opts.Identity = persister.Identity{BrokerID: 1, PodName: podName(1), PodUID: "uid-" + podName(1)}
	p, err := persister.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// With the API server stalled, every answer comes within the operation timeout plus a small margin:
// a Write queued behind a stalled update of its partition, and every partition of a Read larger than
// the persister works on at once. Before, the queued Write took two operation timeouts and the Read
// one per 64 partitions.
func TestAnswersWithinTheOperationTimeoutWhenTheAPIServerStalls(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	const timeout = 3 * time.Second
	const margin = 1500 * time.Millisecond
	var stall stallSwitch
	p := newPersisterWithOptions(t, persister.Options{Client: newClient(t, stall.config()), Namespace: ns, OperationTimeout: timeout})

	const partitions = 200
	initReq := sharestate.InitializeRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.InitializePartition]{{TopicID: topicA}}}
	readReq := sharestate.ReadRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadPartition]{{TopicID: topicA}}}
	for i := range int32(partitions) {
		initReq.Topics[0].Partitions = append(initReq.Topics[0].Partitions, sharestate.InitializePartition{Partition: i})
		readReq.Topics[0].Partitions = append(readReq.Topics[0].Partitions, sharestate.ReadPartition{Partition: i, LeaderEpoch: 2})
	}
	// Set up with a persister of the default timeout: 200 Initializes may take longer than 3 s on a
	// busy machine.
	for _, r := range newPersister(t, ns, 1).Initialize(context.Background(), initReq).Topics[0].Partitions {
		expectCode(t, "initialize", r, sharestate.ErrNone)
	}
	expectCode(t, "read", read(t, p, "g", 0, 1).PartitionResult, sharestate.ErrNone)

	stall.on.Store(true)
	var wg sync.WaitGroup
	for i := range 2 { // the second queues behind the first's stalled update
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			got := write(t, p, "g", writeOf(0, 1, -1, acked(int64(i), int64(i))))
			if took := time.Since(start); got.ErrorCode != sharestate.ErrCoordinatorNotAvailable || took > timeout+margin {
				t.Errorf("write %d under a stall: %s after %v, want COORDINATOR_NOT_AVAILABLE within %v", i, got.ErrorCode, took, timeout+margin)
			}
		}()
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	resp := p.Read(context.Background(), readReq)
	if took := time.Since(start); took > timeout+margin {
		t.Errorf("a read of %d partitions under a stall took %v, want at most %v", partitions, took, timeout+margin)
	}
	for _, r := range resp.Topics[0].Partitions {
		if r.ErrorCode != sharestate.ErrCoordinatorNotAvailable {
			t.Fatalf("partition %d under a stall: %s", r.Partition, r.ErrorCode)
		}
	}
	wg.Wait()
}

// A bulk Read stuck in its own client (its rate limiter exhausted, here: stalled) does not hold up the
// Writes of live partitions, which go through Client.
func TestWritesDoNotQueueBehindABulkRead(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	var stall stallSwitch
	p := newPersisterWithOptions(t, persister.Options{
		Client: newClient(t, env.Config), BulkClient: newClient(t, stall.config()), Namespace: ns,
		OperationTimeout: 20 * time.Second, RequestTimeout: 2 * time.Second,
	})
	expectCode(t, "initialize", initialize(t, p, "g", 0, 0, -1), sharestate.ErrNone)
	expectCode(t, "initialize", initialize(t, p, "g", 1, 0, -1), sharestate.ErrNone)
	expectCode(t, "read", read(t, p, "g", 0, 1).PartitionResult, sharestate.ErrNone)

	stall.on.Store(true)
	readDone := make(chan sharestate.ReadResult, 1)
	go func() { readDone <- read(t, p, "g", 1, 1) }()
	for i := range int64(20) {
		expectCode(t, "write beside a stuck bulk read", write(t, p, "g", writeOf(0, 1, -1, acked(i, i))), sharestate.ErrNone)
	}
	select {
	case r := <-readDone:
		t.Fatalf("the bulk read finished while its client was stalled: %+v", r)
	default:
	}
	stall.on.Store(false)
	if r := read(t, p, "g", 0, 1); r.ErrorCode != sharestate.ErrNone || len(r.StateBatches) != 1 || r.StateBatches[0] != acked(0, 19) {
		t.Fatalf("state after the writes: %+v", r)
	}
	if r := <-readDone; r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("the bulk read after the stall: %s", r.ErrorCode)
	}
}
