package serve

import (
	"context"
	"net"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// These tests put Client and the server together, with echoStore behind them, to check
// that everything a Store call carries survives the trip both ways, and how the client fails.

func newClient(t testing.TB, opts kafkawire.ClientOptions) *kafkawire.Client {
	t.Helper()
	c, err := kafkawire.NewClient(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestClientCarriesEveryOperation(t *testing.T) {
	_, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := newClient(t, kafkawire.ClientOptions{Address: addr})
	ctx := context.Background()

	init := c.Initialize(ctx, sharestate.InitializeRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.InitializePartition]{
		{TopicID: topicA, Partitions: []sharestate.InitializePartition{{Partition: 0, StateEpoch: 0}, {Partition: 5, StateEpoch: int32(sharestate.ErrFencedStateEpoch)}}},
		{TopicID: topicB, Partitions: []sharestate.InitializePartition{{Partition: 2, StateEpoch: int32(sharestate.ErrInvalidRequest)}}},
	}})
	wantInit := sharestate.InitializeResponse{Topics: []sharestate.TopicData[sharestate.PartitionResult]{
		{TopicID: topicA, Partitions: []sharestate.PartitionResult{{Partition: 0, ErrorMessage: "m0"}, {Partition: 5, ErrorCode: sharestate.ErrFencedStateEpoch, ErrorMessage: "m5"}}},
		{TopicID: topicB, Partitions: []sharestate.PartitionResult{{Partition: 2, ErrorCode: sharestate.ErrInvalidRequest, ErrorMessage: "m2"}}},
	}}
	expectEqual(t, "initialize", init, wantInit)

	read := c.Read(ctx, sharestate.ReadRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadPartition]{
		{TopicID: topicA, Partitions: []sharestate.ReadPartition{{Partition: 3, LeaderEpoch: 8}}},
	}})
	wantRead := sharestate.ReadResult{PartitionResult: sharestate.PartitionResult{Partition: 3}, StateEpoch: 9, StartOffset: 30,
		StateBatches: []sharestate.StateBatch{{FirstOffset: 3, LastOffset: 8, DeliveryState: 2, DeliveryCount: 3}}}
	expectEqual(t, "read", read.Topics[0].Partitions[0], wantRead)

	write := c.Write(ctx, sharestate.WriteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.WritePartition]{
		{TopicID: topicA, Partitions: []sharestate.WritePartition{{Partition: 1, StartOffset: 4, DeliveryCompleteCount: 17,
			StateBatches: []sharestate.StateBatch{{FirstOffset: 4, LastOffset: 9, DeliveryState: 4, DeliveryCount: 2}, {FirstOffset: 11, LastOffset: 11}}}}},
	}})
	expectEqual(t, "write (v1 carries the delivery-complete count)", write.Topics[0].Partitions[0],
		sharestate.PartitionResult{Partition: 1, ErrorMessage: dccMessage(17, 2)})

	del := c.Delete(ctx, sharestate.DeleteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.DeletePartition]{
		{TopicID: topicB, Partitions: []sharestate.DeletePartition{{Partition: 4}}},
	}})
	expectEqual(t, "delete", del.Topics[0].Partitions[0], sharestate.PartitionResult{Partition: 4, ErrorMessage: "m4"})

	summary := c.ReadSummary(ctx, sharestate.ReadSummaryRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{
		{TopicID: topicA, Partitions: []sharestate.ReadSummaryPartition{{Partition: 6, LeaderEpoch: 2}}},
	}})
	expectEqual(t, "read summary (v1 carries the delivery-complete count)", summary.Topics[0].Partitions[0],
		sharestate.ReadSummaryResult{PartitionResult: sharestate.PartitionResult{Partition: 6}, StateEpoch: 7, LeaderEpoch: 2, StartOffset: 100, DeliveryCompleteCount: 12})
}

func expectEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

// With nothing listening, every partition is answered COORDINATOR_NOT_AVAILABLE, which Kafka's
// callers retry.
func TestClientWithoutSidecar(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := newClient(t, kafkawire.ClientOptions{Address: addr})
	resp := c.Write(context.Background(), sharestate.WriteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.WritePartition]{
		{TopicID: topicA, Partitions: []sharestate.WritePartition{{Partition: 1}, {Partition: 2}}},
		{TopicID: topicB, Partitions: []sharestate.WritePartition{{Partition: 7}}},
	}})
	var parts []int32
	for _, topic := range resp.Topics {
		for _, p := range topic.Partitions {
			if p.ErrorCode != sharestate.ErrCoordinatorNotAvailable || p.ErrorMessage == "" {
				t.Fatalf("partition %d answered %v %q, want COORDINATOR_NOT_AVAILABLE with a reason", p.Partition, p.ErrorCode, p.ErrorMessage)
			}
			parts = append(parts, p.Partition)
		}
	}
	expectEqual(t, "partitions answered", parts, []int32{1, 2, 7})
	summary := c.ReadSummary(context.Background(), sharestate.ReadSummaryRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{
		{TopicID: topicA, Partitions: []sharestate.ReadSummaryPartition{{Partition: 1}}},
	}})
	if r := summary.Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrCoordinatorNotAvailable || r.StartOffset != -1 || r.DeliveryCompleteCount != -1 {
		t.Fatalf("summary answered %+v", r)
	}
}

// A call whose context ends is answered COORDINATOR_NOT_AVAILABLE at once; the connection stays
// usable for the calls after it, even though the late answer arrives on it.
func TestClientHonoursDeadlines(t *testing.T) {
	store := &echoStore{delay: func(p int32) time.Duration {
		if p == 1 {
			return 500 * time.Millisecond
		}
		return 0
	}}
	_, addr := startServer(t, ServerOptions{Store: store})
	c := newClient(t, kafkawire.ClientOptions{Address: addr, Connections: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	r := c.Delete(ctx, deleteOf(1)).Topics[0].Partitions[0]
	if r.ErrorCode != sharestate.ErrCoordinatorNotAvailable || time.Since(start) > 400*time.Millisecond {
		t.Fatalf("after %v: %+v", time.Since(start), r)
	}
	time.Sleep(500 * time.Millisecond) // the late answer arrives and is dropped
	if r := c.Delete(context.Background(), deleteOf(2)).Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrNone || r.ErrorMessage != "m2" {
		t.Fatalf("the next call: %+v", r)
	}
}

func deleteOf(partition int32) sharestate.DeleteRequest {
	return sharestate.DeleteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.DeletePartition]{
		{TopicID: topicA, Partitions: []sharestate.DeletePartition{{Partition: partition}}},
	}}
}

// One connection carries many calls at once: 50 calls that each take 200ms finish in about 200ms.
func TestClientPipelines(t *testing.T) {
	store := &echoStore{delay: func(int32) time.Duration { return 200 * time.Millisecond }}
	_, addr := startServer(t, ServerOptions{Store: store})
	c := newClient(t, kafkawire.ClientOptions{Address: addr, Connections: 1})
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan string, 50)
	for i := range 50 {
		wg.Go(func() {
			r := c.Delete(context.Background(), deleteOf(int32(i))).Topics[0].Partitions[0]
			if r.Partition != int32(i) || r.ErrorMessage != msg(int32(i)) {
				errs <- r.ErrorMessage
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatalf("a call got another's answer or none: %q", e)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("50 calls of 200ms took %v on one connection: not pipelined", d)
	}
}

// Many connections at once, each pipelining, all get their own answers.
func TestManyConnections(t *testing.T) {
	_, addr := startServer(t, ServerOptions{Store: &echoStore{delay: func(p int32) time.Duration { return time.Duration(p%7) * time.Millisecond }}})
	c := newClient(t, kafkawire.ClientOptions{Address: addr, Connections: 64})
	var wg sync.WaitGroup
	failures := make(chan string, 128)
	for w := range 128 {
		wg.Go(func() {
			for i := range 20 {
				p := int32(w*100 + i)
				r := c.ReadSummary(context.Background(), sharestate.ReadSummaryRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{
					{TopicID: topicA, Partitions: []sharestate.ReadSummaryPartition{{Partition: p, LeaderEpoch: int32(i)}}},
				}}).Topics[0].Partitions[0]
				if r.Partition != p || r.LeaderEpoch != int32(i) || r.DeliveryCompleteCount != 2*p {
					failures <- "wrong answer"
					return
				}
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
}

// A sidecar that restarts is reached again: the broken connection is dialled anew.
func TestClientReconnects(t *testing.T) {
	srv, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := newClient(t, kafkawire.ClientOptions{Address: addr, Connections: 1})
	if r := c.Delete(context.Background(), deleteOf(1)).Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("first call: %+v", r)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := c.Delete(context.Background(), deleteOf(2)).Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrCoordinatorNotAvailable {
		t.Fatalf("with the sidecar down: %+v", r)
	}
	again, err := NewServer(ServerOptions{Store: &echoStore{}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", addr, err)
	}
	go func() { _ = again.Serve(ln) }()
	t.Cleanup(func() { _ = again.Shutdown(context.Background()) })
	if r := c.Delete(context.Background(), deleteOf(3)).Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrNone || r.ErrorMessage != "m3" {
		t.Fatalf("after the restart: %+v", r)
	}
}

// A request goes to the connection with the fewest requests in flight: while one connection waits on
// a slow answer, the calls after it go round it instead of queueing behind it.
func TestClientAvoidsAStalledConnection(t *testing.T) {
	store := &echoStore{delay: func(p int32) time.Duration {
		if p == 99 {
			return 2 * time.Second
		}
		return 0
	}}
	_, addr := startServer(t, ServerOptions{Store: store})
	c := newClient(t, kafkawire.ClientOptions{Address: addr, Connections: 2})
	slow := make(chan sharestate.DeleteResponse, 1)
	go func() { slow <- c.Delete(context.Background(), deleteOf(99)) }()
	waitFor(t, "the slow call to reach the store", func() bool { return store.calls.Load() == 1 })
	start := time.Now()
	for i := range int32(20) {
		if r := c.Delete(context.Background(), deleteOf(i)).Topics[0].Partitions[0]; r.ErrorMessage != msg(i) {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("20 fast calls took %v: some waited behind the slow one", d)
	}
	if r := (<-slow).Topics[0].Partitions[0]; r.ErrorMessage != msg(99) {
		t.Fatalf("the slow call: %+v", r)
	}
}

// A connection unused for the client's idle timeout is replaced before the next request, rather than
// risk sending on one the sidecar is closing as idle.
func TestClientReplacesIdleConnections(t *testing.T) {
	srv, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	c := newClient(t, kafkawire.ClientOptions{Address: addr, Connections: 1, IdleTimeout: 100 * time.Millisecond})
	accepted := func() float64 { return recorded(srv.obs).get("accepted") }
	before := accepted()
	for i := range int32(3) {
		if r := c.Delete(context.Background(), deleteOf(i)).Topics[0].Partitions[0]; r.ErrorMessage != msg(i) {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	if got := accepted() - before; got != 1 {
		t.Fatalf("%v connections for three calls in a row, want 1", got)
	}
	time.Sleep(150 * time.Millisecond)
	if r := c.Delete(context.Background(), deleteOf(7)).Topics[0].Partitions[0]; r.ErrorMessage != msg(7) {
		t.Fatalf("call after idling: %+v", r)
	}
	if got := accepted() - before; got != 2 {
		t.Fatalf("%v connections after idling past the client's timeout, want a second one", got)
	}
}
