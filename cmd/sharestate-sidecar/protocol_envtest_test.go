package main_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"reflect"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// The wire-level behaviour a Kafka client relies on, against the binary: version negotiation,
// refusals, pipelining, framing limits, many connections, idle timeout, shutdown, health, metrics.

// franz-go opens with ApiVersions v5; the sidecar speaks up to v4, answers with the v0 fallback, and
// franz-go retries at v4 and then sees the five share-state APIs.
func TestAPIVersions(t *testing.T) {
	testenv.Require(t, env)
	s := startSidecar(t, env.Namespace(t), sidecarOptions{})
	k := newKafka(t, s.addr)
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "conformance-test", "1"
	resp := k.request(req).(*kmsg.ApiVersionsResponse)
	if resp.GetVersion() != 4 || resp.ErrorCode != 0 {
		t.Fatalf("ApiVersions v%d, error %d; want v4 after the fallback", resp.GetVersion(), resp.ErrorCode)
	}
	var got []kafkawire.API
	for _, k := range resp.ApiKeys {
		got = append(got, kafkawire.API{Key: k.ApiKey, MinVersion: k.MinVersion, MaxVersion: k.MaxVersion})
	}
	if !reflect.DeepEqual(got, kafkawire.APIs) {
		t.Fatalf("API keys %+v, want %+v", got, kafkawire.APIs)
	}
	if n := s.metric(t, `sharestate_sidecar_requests_total{api="ApiVersions",error="UNSUPPORTED_VERSION"}`); n == "" || n == "0" {
		t.Fatalf("franz-go's v5 ApiVersions was not answered with the fallback (count %q)", n)
	}
	// A Kafka API the sidecar does not serve is refused by franz-go itself: it read the versions.
	if _, err := k.requestErr(kmsg.NewPtrMetadataRequest()); err == nil {
		t.Fatal("a Metadata request was answered")
	}
}

// An unsupported version of a served API closes the connection, as Kafka does; other connections,
// and the client's next connection, go on.
func TestUnsupportedVersion(t *testing.T) {
	testenv.Require(t, env)
	s := startSidecar(t, env.Namespace(t), sidecarOptions{})
	k := newKafka(t, s.addr)
	expectCode(t, "summary", k.summary("g", 0, 0).ErrorCode, nil, errNone)
	c := dial(t, s.addr)
	if _, err := c.Write(wiretest.RawFrame(kafkawire.KeyWriteShareGroupState, 2, 1, []byte{0})); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	expectCode(t, "summary after another connection's refusal", k.summary("g", 0, 0).ErrorCode, nil, errNone)
	s.eventuallyMetric(t, `sharestate_sidecar_connections_closed_total{reason="unsupported_request"}`, "1")
}

// Requests pipelined on one connection are answered in request order, whatever each costs: Writes
// that update the API server, ReadSummaries and ApiVersions, which are answered from memory.
func TestPipelining(t *testing.T) {
	testenv.Require(t, env)
	s := startSidecar(t, env.Namespace(t), sidecarOptions{})
	k := newKafka(t, s.addr)
	for p := range int32(4) {
		expectCode(t, "initialize", k.initialize("g", p, 1, 0).ErrorCode, nil, errNone)
		expectCode(t, "read", k.read("g", p, 1).ErrorCode, nil, errNone)
	}
	c := dial(t, s.addr)
	var burst []byte
	var keys []int16
	for i := range 60 {
		var req kmsg.Request
		switch i % 3 {
		case 0:
			part := writeOf(1, 1, -1, int32(i), batch{first: int64(i), last: int64(i), state: 2, count: 1})
			part.Partition = int32(i % 4)
			w := writeRequestOf("g", part)
			w.Version = 1
			req = w
		case 1:
			sum := kmsg.NewPtrReadShareGroupStateSummaryRequest()
			sum.GroupID = "g"
			sum.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: topicA,
				Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: int32(i % 4)}}}}
			sum.Version = 1
			req = sum
		default:
			v := kmsg.NewPtrApiVersionsRequest()
			v.Version = 0
			req = v
		}
		keys = append(keys, req.Key())
		burst = append(burst, kmsg.NewRequestFormatter().AppendRequest(nil, req, int32(10_000+i))...) // AppendRequest frames only an empty dst
	}
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	for i, key := range keys {
		corrID, body := wiretest.ReadResponse(t, c, key != kafkawire.KeyAPIVersions)
		if corrID != int32(10_000+i) {
			t.Fatalf("response %d has correlation id %d, want %d", i, corrID, 10_000+i)
		}
		if key == kafkawire.KeyWriteShareGroupState {
			resp := kmsg.WriteShareGroupStateResponse{Version: 1}
			if err := resp.ReadFrom(body); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 || resp.Topics[0].Partitions[0].Partition != int32(i%4) {
				t.Fatalf("write %d: %+v, %v", i, resp, err)
			}
		}
	}
	for p := range int32(4) {
		if rd := k.read("g", p, 1); len(rd.StateBatches) != 5 {
			t.Fatalf("partition %d holds %d acknowledged offsets, want the 5 pipelined writes'", p, len(batchesOf(rd.StateBatches)))
		}
	}
}

// A request above --max-request-bytes, and bytes that are not Kafka's protocol, close their
// connection at once; a client on another connection notices nothing.
func TestOversizedRequestsAndGarbage(t *testing.T) {
	testenv.Require(t, env)
	s := startSidecar(t, env.Namespace(t), sidecarOptions{args: []string{"--max-request-bytes=65536"}})
	k := newKafka(t, s.addr)
	expectCode(t, "summary", k.summary("g", 0, 0).ErrorCode, nil, errNone)

	big := writeRequestOf("g", writeOf(0, 0, -1, -1, make([]batch, 4000)...))
	big.Version = 1
	oversized := kmsg.NewRequestFormatter().AppendRequest(nil, big, 1)
	c := dial(t, s.addr)
	if _, err := c.Write(oversized[:4096]); err != nil { // the size field is enough to refuse it
		t.Fatal(err)
	}
	expectClosed(t, c)

	for _, garbage := range [][]byte{
		[]byte("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"),
		{0xff, 0xff, 0xff, 0xff},                     // a negative size
		{0, 0, 0, 2, 0, 85},                          // too short for a header
		wiretest.RawFrame(85, 1, 1, []byte{0, 0xff}), // a Write whose group id runs past the frame
	} {
		c := dial(t, s.addr)
		if _, err := c.Write(garbage); err != nil {
			t.Fatal(err)
		}
		expectClosed(t, c)
	}
	expectCode(t, "summary after the refusals", k.summary("g", 0, 0).ErrorCode, nil, errNone)
	for reason, want := range map[string]string{"oversized_request": "2", "malformed_request": "3"} {
		s.eventuallyMetric(t, `sharestate_sidecar_connections_closed_total{reason="`+reason+`"}`, want)
	}
}

// Many connections at once, each with requests in flight: every answer is right.
func TestManyConnections(t *testing.T) {
	testenv.Require(t, env)
	s := startSidecar(t, env.Namespace(t), sidecarOptions{})
	c, err := kafkawire.NewClient(kafkawire.ClientOptions{Address: s.addr, Connections: 48})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	var wg sync.WaitGroup
	failures := make(chan string, 96)
	for w := range 96 {
		wg.Go(func() {
			p := int32(w % 24)
			group := "g" + strconv.Itoa(w/24)
			if r := c.Initialize(ctx, one(group, sharestate.InitializePartition{Partition: p, StateEpoch: 1})).Topics[0].Partitions[0]; r.ErrorCode != 0 {
				failures <- "initialize: " + r.ErrorMessage
				return
			}
			for i := range 5 {
				r := c.ReadSummary(ctx, one(group, sharestate.ReadSummaryPartition{Partition: p})).Topics[0].Partitions[0]
				if r.ErrorCode != 0 || r.Partition != p || r.StateEpoch != 1 {
					failures <- "summary " + strconv.Itoa(i) + ": " + r.ErrorMessage
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
	if n := s.metric(t, "sharestate_sidecar_connections"); n != "48" {
		t.Fatalf("open connections %q, want the client's 48", n)
	}
}

func one[P any](group string, in P) sharestate.Request[P] {
	return sharestate.Request[P]{GroupID: group, Topics: []sharestate.TopicData[P]{{TopicID: topicA, Partitions: []P{in}}}}
}

func TestIdleConnectionsAreClosed(t *testing.T) {
	testenv.Require(t, env)
	s := startSidecar(t, env.Namespace(t), sidecarOptions{args: []string{"--idle-timeout=1s"}})
	c := dial(t, s.addr)
	start := time.Now()
	expectClosed(t, c)
	if d := time.Since(start); d < 900*time.Millisecond || d > 4*time.Second {
		t.Fatalf("closed after %v, want about 1s", d)
	}
}

// On SIGTERM the sidecar stops reading, answers what it read, and exits 0; every write it answered
// NONE is durable, as a new sidecar's Read shows.
func TestGracefulShutdown(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	s := startSidecar(t, ns, sidecarOptions{})
	k := newKafka(t, s.addr)
	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	expectCode(t, "read", k.read("g", 0, 1).ErrorCode, nil, errNone)
	c := dial(t, s.addr)
	const n = 300
	var burst []byte
	for i := range n {
		w := kmsg.NewPtrWriteShareGroupStateRequest()
		w.Version, w.GroupID = 1, "g"
		w.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{
			writeOf(1, 1, -1, -1, batch{int64(i), int64(i), 2, 1}),
		}}}
		burst = append(burst, kmsg.NewRequestFormatter().AppendRequest(nil, w, int32(i))...)
	}
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	// Once the first answer is back, the sidecar has read a good part of the burst: the SIGTERM
	// catches requests in flight.
	if corrID, _ := wiretest.ReadResponse(t, c, true); corrID != 0 {
		t.Fatalf("first response: correlation id %d", corrID)
	}
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	acked := append([]int{0}, readUntilClosed(t, c, 1, n)...)
	<-s.exited
	if s.exitErr != nil {
		t.Fatalf("the sidecar exited with %v after SIGTERM:\n%s", s.exitErr, s.logs)
	}
	t.Logf("%d of %d pipelined writes were answered before the connection closed", len(acked), n)

	after := newKafka(t, startSidecar(t, ns, sidecarOptions{brokerID: 2}).addr)
	stored := map[int64]bool{}
	for _, b := range batchesOf(after.read("g", 0, 1).StateBatches) {
		for o := b.first; o <= b.last; o++ {
			stored[o] = true
		}
	}
	for _, i := range acked {
		if !stored[int64(i)] {
			t.Fatalf("write %d was answered NONE but is not stored", i)
		}
	}
}

// readUntilClosed reads the responses to Writes from..n-1 until the server closes, checking they come
// in order, and returns the indexes of those answered NONE.
func readUntilClosed(t *testing.T, c net.Conn, from, n int) []int {
	t.Helper()
	var acked []int
	for i := from; ; i++ {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		frame, err := kafkawire.ReadFrame(c, 1<<20)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the connection neither answered nor closed")
			}
			return acked
		}
		if i >= n || int32(binary.BigEndian.Uint32(frame)) != int32(i) {
			t.Fatalf("response %d out of order", i)
		}
		resp := kmsg.WriteShareGroupStateResponse{Version: 1}
		if err := resp.ReadFrom(frame[5:]); err != nil {
			t.Fatal(err)
		}
		if resp.Topics[0].Partitions[0].ErrorCode == 0 {
			acked = append(acked, i)
		}
	}
}

func TestHealthAndMetrics(t *testing.T) {
	testenv.Require(t, env)
	s := startSidecar(t, env.Namespace(t), sidecarOptions{})
	// kubebuilder's names, as the operator's: /healthz and /readyz.
	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200, "/livez": 404} {
		if got := s.probe(path); got != want {
			t.Fatalf("%s answered %d, want %d", path, got, want)
		}
	}
	k := newKafka(t, s.addr)
	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	expectCode(t, "initialize again", k.initialize("g", 0, 0, 0).ErrorCode, nil, errFencedState)
	for sample, want := range map[string]string{
		`sharestate_sidecar_requests_total{api="InitializeShareGroupState",error="NONE"}`:               "1",
		`sharestate_sidecar_requests_total{api="InitializeShareGroupState",error="FENCED_STATE_EPOCH"}`: "1",
		`sharestate_persister_operations_total{operation="initialize",result="NONE"}`:                   "1", // the persister's, on the same registry
		`sharestate_sidecar_request_duration_seconds_count{api="InitializeShareGroupState"}`:            "2",
		`sharestate_sidecar_connections`: "1",
	} {
		if got := s.metric(t, sample); got != want {
			t.Fatalf("%s = %q, want %s", sample, got, want)
		}
	}
	// Every status update is timed as the persister sees it, beside the Write that waited for it.
	expectCode(t, "write", k.write("g", writeOf(1, 0, 0, -1, batch{0, 9, 2, 1})).ErrorCode, nil, errNone)
	updates := s.metric(t, `sharestate_persister_api_requests_total{outcome="success",verb="update_status"}`)
	if timed := s.metric(t, "sharestate_persister_status_update_duration_seconds_count"); timed == "" || timed == "0" || timed != updates {
		t.Fatalf("status updates timed: %q, want the %q made", timed, updates)
	}
	if got := s.metric(t, "sharestate_persister_write_duration_seconds_count"); got != "1" {
		t.Fatalf("Writes timed: %q, want 1", got)
	}
}
