package serve

import (
	"context"
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// seedRequests are valid request frames (without the size field) of every API and version the
// server serves, for the fuzzers to start from.
func seedRequests() [][]byte {
	topics := []sharestate.TopicData[sharestate.WritePartition]{{TopicID: topicA, Partitions: []sharestate.WritePartition{
		{Partition: 1, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 5, DeliveryCompleteCount: 2, StateBatches: []sharestate.StateBatch{{FirstOffset: 5, LastOffset: 9, DeliveryState: 2, DeliveryCount: 1}}},
	}}}
	apiVersions := kmsg.NewPtrApiVersionsRequest()
	apiVersions.ClientSoftwareName, apiVersions.ClientSoftwareVersion = "x", "1"
	reqs := []kmsg.Request{
		kafkawire.InitializeRequestToKmsg(sharestate.InitializeRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.InitializePartition]{
			{TopicID: topicA, Partitions: []sharestate.InitializePartition{{Partition: 0, StateEpoch: 1}}}}}),
		kafkawire.ReadRequestToKmsg(sharestate.ReadRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadPartition]{
			{TopicID: topicA, Partitions: []sharestate.ReadPartition{{Partition: 0, LeaderEpoch: 1}}}}}),
		kafkawire.WriteRequestToKmsg(sharestate.WriteRequest{GroupID: "g", Topics: topics}),
		kafkawire.DeleteRequestToKmsg(sharestate.DeleteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.DeletePartition]{
			{TopicID: topicA, Partitions: []sharestate.DeletePartition{{Partition: 0}}}}}),
		kafkawire.ReadSummaryRequestToKmsg(sharestate.ReadSummaryRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{
			{TopicID: topicA, Partitions: []sharestate.ReadSummaryPartition{{Partition: 0}}}}}),
		apiVersions,
	}
	var seeds [][]byte
	for _, req := range reqs {
		api, _ := kafkawire.LookupAPI(req.Key())
		for v := api.MinVersion; v <= api.MaxVersion; v++ {
			seeds = append(seeds, frameOf(req, v, int32(v))[4:])
		}
	}
	return append(seeds, wiretest.RawFrame(kafkawire.KeyAPIVersions, 99, 1, nil)[4:], wiretest.RawFrame(1000, 0, 1, []byte{1, 2})[4:])
}

// FuzzDecode drives every request decoder path (the header, each API at each version, refusals)
// with arbitrary frames; a request that decodes is served and its response encoded. Nothing may
// panic, and what a frame decodes into is bounded by its size: kmsg refuses an array whose length
// the remaining bytes cannot hold, so a length field alone allocates nothing.
func FuzzDecode(f *testing.F) {
	for _, s := range seedRequests() {
		f.Add(s)
	}
	store := &echoStore{}
	f.Fuzz(func(t *testing.T, frame []byte) {
		req, err := decode(frame)
		if err != nil {
			return
		}
		resp, _ := req.serve(context.Background(), store)
		out := kafkawire.AppendResponse(nil, req.header, resp)
		if len(out) > 64*len(frame)+1024 {
			t.Fatalf("a %d-byte request made a %d-byte response", len(frame), len(out))
		}
	})
}

// FuzzConnection feeds an arbitrary byte stream to a connection, as a client would send it, then
// half-closes, and reads everything the server answers until it closes: no panic, no hang, and what
// comes back is whole frames.
func FuzzConnection(f *testing.F) {
	var pipelined []byte
	for _, s := range seedRequests() {
		f.Add(append(withSize(s), withSize(s)...))
		pipelined = append(pipelined, withSize(s)...)
	}
	f.Add(pipelined)
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	_, addr := startServer(f, ServerOptions{Store: &echoStore{}, MaxRequestBytes: 1 << 16})
	f.Fuzz(func(t *testing.T, stream []byte) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		go func() {
			_, _ = c.Write(stream) // fails once the server has closed on a bad request: fine
			_ = c.(*net.TCPConn).CloseWrite()
		}()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			_, err := kafkawire.ReadFrame(c, 1<<24)
			if err == nil {
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server neither answered nor closed the connection")
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("reading responses: %v", err)
			}
			return
		}
	})
}

func withSize(frame []byte) []byte {
	out := make([]byte, 4, 4+len(frame))
	out[0], out[1], out[2], out[3] = byte(len(frame)>>24), byte(len(frame)>>16), byte(len(frame)>>8), byte(len(frame))
	return append(out, frame...)
}
