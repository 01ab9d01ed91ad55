package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// echoStore is a sharestate.Store whose answers are computed from the request, so that a test can
// tell each partition's answer came back to the right place with every field intact:
//   - Initialize and Delete answer ErrorCode(StateEpoch) (Delete: NONE) with message "m<partition>";
//   - Read answers StateEpoch = LeaderEpoch+1, StartOffset = 10*partition and one batch at the partition;
//   - Write answers ErrorCode(StateEpoch) and, in the message, the delivery-complete count it was given;
//   - ReadSummary answers LeaderEpoch = its input, DeliveryCompleteCount = 2*partition.
//
// delay, if set, holds a partition's answer back; panics, if set, panics instead; calls counts the
// partitions asked for.
type echoStore struct {
	delay  func(partition int32) time.Duration
	panics func(partition int32) bool
	calls  atomic.Int64
}

func (s *echoStore) wait(ctx context.Context, partition int32) error {
	s.calls.Add(1)
	if s.panics != nil && s.panics(partition) {
		panic("echoStore told to panic")
	}
	if s.delay == nil {
		return nil
	}
	select {
	case <-time.After(s.delay(partition)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func respond[P, R any](ctx context.Context, s *echoStore, req sharestate.Request[P], part func(P) int32, answer func(P) R, cancelled func(int32) R) sharestate.Response[R] {
	resp := sharestate.Response[R]{Topics: make([]sharestate.TopicData[R], len(req.Topics))}
	for i, t := range req.Topics {
		resp.Topics[i].TopicID = t.TopicID
		for _, p := range t.Partitions {
			if err := s.wait(ctx, part(p)); err != nil {
				resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, cancelled(part(p)))
				continue
			}
			resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, answer(p))
		}
	}
	return resp
}

func unavailable(partition int32) sharestate.PartitionResult {
	return sharestate.PartitionResult{Partition: partition, ErrorCode: sharestate.ErrCoordinatorNotAvailable, ErrorMessage: "cancelled"}
}

func (s *echoStore) Initialize(ctx context.Context, req sharestate.InitializeRequest) sharestate.InitializeResponse {
	return respond(ctx, s, req, func(p sharestate.InitializePartition) int32 { return p.Partition },
		func(p sharestate.InitializePartition) sharestate.PartitionResult {
			return sharestate.PartitionResult{Partition: p.Partition, ErrorCode: sharestate.ErrorCode(p.StateEpoch), ErrorMessage: msg(p.Partition)}
		}, unavailable)
}

func (s *echoStore) Read(ctx context.Context, req sharestate.ReadRequest) sharestate.ReadResponse {
	return respond(ctx, s, req, func(p sharestate.ReadPartition) int32 { return p.Partition },
		func(p sharestate.ReadPartition) sharestate.ReadResult {
			return sharestate.ReadResult{
				PartitionResult: sharestate.PartitionResult{Partition: p.Partition},
				StateEpoch:      p.LeaderEpoch + 1, StartOffset: 10 * int64(p.Partition),
				StateBatches: []sharestate.StateBatch{{FirstOffset: int64(p.Partition), LastOffset: int64(p.Partition) + 5, DeliveryState: 2, DeliveryCount: 3}},
			}
		}, func(p int32) sharestate.ReadResult { return sharestate.ReadResult{PartitionResult: unavailable(p)} })
}

func (s *echoStore) Write(ctx context.Context, req sharestate.WriteRequest) sharestate.WriteResponse {
	return respond(ctx, s, req, func(p sharestate.WritePartition) int32 { return p.Partition },
		func(p sharestate.WritePartition) sharestate.PartitionResult {
			return sharestate.PartitionResult{Partition: p.Partition, ErrorCode: sharestate.ErrorCode(p.StateEpoch), ErrorMessage: dccMessage(p.DeliveryCompleteCount, len(p.StateBatches))}
		}, unavailable)
}

func (s *echoStore) Delete(ctx context.Context, req sharestate.DeleteRequest) sharestate.DeleteResponse {
	return respond(ctx, s, req, func(p sharestate.DeletePartition) int32 { return p.Partition },
		func(p sharestate.DeletePartition) sharestate.PartitionResult {
			return sharestate.PartitionResult{Partition: p.Partition, ErrorMessage: msg(p.Partition)}
		}, unavailable)
}

func (s *echoStore) ReadSummary(ctx context.Context, req sharestate.ReadSummaryRequest) sharestate.ReadSummaryResponse {
	return respond(ctx, s, req, func(p sharestate.ReadSummaryPartition) int32 { return p.Partition },
		func(p sharestate.ReadSummaryPartition) sharestate.ReadSummaryResult {
			return sharestate.ReadSummaryResult{
				PartitionResult: sharestate.PartitionResult{Partition: p.Partition},
				StateEpoch:      7, LeaderEpoch: p.LeaderEpoch, StartOffset: 100, DeliveryCompleteCount: 2 * p.Partition,
			}
		}, func(p int32) sharestate.ReadSummaryResult {
			return sharestate.ReadSummaryResult{PartitionResult: unavailable(p)}
		})
}

func msg(partition int32) string { return fmt.Sprintf("m%d", partition) }

func dccMessage(dcc int32, batches int) string { return fmt.Sprintf("dcc=%d batches=%d", dcc, batches) }

// startServer serves store on a loopback port until the test ends; a recorder observes it unless
// opts names an observer.
func startServer(t testing.TB, opts ServerOptions) (*Server, string) {
	t.Helper()
	if opts.Observer == nil {
		opts.Observer = newRecorder()
	}
	srv, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv, serveUntilCleanup(t, srv)
}

// serveUntilCleanup serves s (a Server or a Proxy) on a loopback port, and shuts it down when the
// test ends, checking that Serve then returns ErrServerClosed. It returns the address.
func serveUntilCleanup(t testing.TB, s interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
}) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		if err := <-done; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v", err)
		}
	})
	return ln.Addr().String()
}

func dialRaw(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// frameOf encodes a request the way a Kafka client does.
func frameOf(req kmsg.Request, version int16, corrID int32) []byte {
	req.SetVersion(version)
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, corrID)
}

// expectClosed checks that the server closes c (after any responses already due, which it skips).
func expectClosed(t testing.TB, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("the server did not close the connection")
		}
		return
	}
}

func writeRequest(group string, partitions ...sharestate.WritePartition) *kmsg.WriteShareGroupStateRequest {
	return kafkawire.WriteRequestToKmsg(sharestate.WriteRequest{GroupID: group, Topics: []sharestate.TopicData[sharestate.WritePartition]{{TopicID: topicA, Partitions: partitions}}})
}

var (
	topicA = sharestate.TopicID{0xab, 1}
	topicB = sharestate.TopicID{0xcd, 2}
)
