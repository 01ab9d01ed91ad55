package serve

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

func TestPersisterSender(t *testing.T) {
	for _, tc := range []struct {
		clientID string
		nilID    bool
		want     int32
		ok       bool
	}{
		{clientID: "Persister-client-3", want: 3, ok: true},
		{clientID: "Persister-client-0", want: 0, ok: true},
		{clientID: "Persister-client-2147483647", want: 2147483647, ok: true},
		{nilID: true},
		{clientID: ""},
		{clientID: "sharestate-kafkawire"},
		{clientID: "Persister-client-"},
		{clientID: "Persister-client-2147483648"}, // beyond a Java int
		{clientID: "Persister-client--1"},
		{clientID: "Persister-client-+3"},
		{clientID: "Persister-client-03"},
		{clientID: "Persister-client-3x"},
		{clientID: "persister-client-3"},
		{clientID: "Persister-3"},
		{clientID: "broker-3-fetcher-0"},
	} {
		id := &tc.clientID
		if tc.nilID {
			id = nil
		}
		got, ok := persisterSender(id)
		if got != tc.want || ok != tc.ok {
			t.Errorf("persisterSender(%q, nil=%v) = %d, %v; want %d, %v", tc.clientID, tc.nilID, got, ok, tc.want, tc.ok)
		}
	}
}

// senderStore is echoStore that remembers which broker the context of each Read and Write named.
type senderStore struct {
	echoStore
	mu      sync.Mutex
	senders []string // "7", or "none"
}

func (s *senderStore) note(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := sharestate.SenderFrom(ctx); ok {
		s.senders = append(s.senders, strconv.Itoa(int(id)))
		return
	}
	s.senders = append(s.senders, "none")
}

func (s *senderStore) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.senders...)
}

func (s *senderStore) Read(ctx context.Context, req sharestate.ReadRequest) sharestate.ReadResponse {
	s.note(ctx)
	return s.echoStore.Read(ctx, req)
}

func (s *senderStore) Write(ctx context.Context, req sharestate.WriteRequest) sharestate.WriteResponse {
	s.note(ctx)
	return s.echoStore.Write(ctx, req)
}

// TestServerNamesThePersistersBroker: a request whose client id is a Kafka broker persister's reaches
// the store with that broker named as its sender; any other client id names none.
func TestServerNamesThePersistersBroker(t *testing.T) {
	store := &senderStore{}
	_, addr := startServer(t, ServerOptions{Store: store})
	ctx := context.Background()
	read := sharestate.ReadRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadPartition]{{TopicID: topicA, Partitions: []sharestate.ReadPartition{{Partition: 0}}}}}
	newClient(t, kafkawire.ClientOptions{Address: addr, ClientID: "Persister-client-7"}).Read(ctx, read)
	newClient(t, kafkawire.ClientOptions{Address: addr}).Read(ctx, read)
	if got := store.seen(); len(got) != 2 || got[0] != "7" || got[1] != "none" {
		t.Fatalf("the store saw senders %q, want [7 none]", got)
	}
}

// TestProxyNamesThePersistersBroker: the proxy answers keys 83–87 through the same path, so a Write
// it answers names the sending broker too.
func TestProxyNamesThePersistersBroker(t *testing.T) {
	up := startUpstream(t, func(_, _ int16, corrID int32, frame []byte) upstreamAnswer {
		return upstreamAnswer{body: echoBody(corrID, frame)}
	})
	store := &senderStore{}
	_, addr := startProxy(t, ProxyOptions{Store: store, Upstream: up.ln.Addr().String()})
	c := dialRaw(t, addr)
	req := writeRequest("g", sharestate.WritePartition{Partition: 1, StartOffset: -1})
	req.SetVersion(1)
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("Persister-client-5")).AppendRequest(nil, req, 42)
	if _, err := c.Write(frame); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, true); corrID != 42 {
		t.Fatalf("response to correlation id %d, want 42", corrID)
	}
	if got := store.seen(); len(got) != 1 || got[0] != "5" {
		t.Fatalf("the store saw senders %q, want [5]", got)
	}
}
