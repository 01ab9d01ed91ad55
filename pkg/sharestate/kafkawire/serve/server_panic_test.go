package serve

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/wiretest"
)

// A panic while serving a request is counted as an UNKNOWN_SERVER_ERROR request and as a connection
// closed for an internal error; the connection's requests before it are answered, and the server
// goes on serving the connections it has and the ones it accepts next.
func TestServePanicIsCountedAndClosesOnlyItsConnection(t *testing.T) {
	store := &echoStore{panics: func(p int32) bool { return p == 13 }}
	srv, addr := startServer(t, ServerOptions{Store: store})
	panics := recorded(srv.obs).counter("requests", "WriteShareGroupState", sharestate.ErrUnknownServerError.String())
	closed := recorded(srv.obs).counter("closed", closedPanic)
	beforePanics, beforeClosed := panics(), closed()

	bystander, c := dialRaw(t, addr), dialRaw(t, addr)
	good := frameOf(writeRequest("g", sharestate.WritePartition{Partition: 1, StartOffset: -1}), 1, 1)
	bad := frameOf(writeRequest("g", sharestate.WritePartition{Partition: 13, StartOffset: -1}), 1, 2)
	if _, err := c.Write(append(good, bad...)); err != nil {
		t.Fatal(err)
	}
	if corrID, _ := wiretest.ReadResponse(t, c, true); corrID != 1 {
		t.Fatalf("the request before the panicking one got correlation id %d, want 1", corrID)
	}
	expectClosed(t, c)
	waitFor(t, "the panic and the close to be counted", func() bool {
		return panics() == beforePanics+1 && closed() == beforeClosed+1
	})
	expectAPIVersions(t, bystander)
	expectAPIVersions(t, dialRaw(t, addr))
}

// A panic while decoding (on the connection's reader, before any goroutine of the request's own)
// closes that connection only, and is counted.
func TestDecodePanicClosesOnlyItsConnection(t *testing.T) {
	key := kafkawire.KeyDeleteShareGroupState
	// The stand-in is a decoder with a bug that hostile bytes reach.
	decodeShareState = func(k, v int16, body []byte) (kafkawire.Handler, error) {
		if k == key {
			panic("decoder told to panic")
		}
		return kafkawire.DecodeShareState(k, v, body)
	}
	t.Cleanup(func() { decodeShareState = kafkawire.DecodeShareState }) // after the server's cleanup: no reader is left
	srv, addr := startServer(t, ServerOptions{Store: &echoStore{}})
	closed := recorded(srv.obs).counter("closed", closedPanic)
	counted := recorded(srv.obs).counter("requests", "Unknown", sharestate.ErrUnknownServerError.String())
	beforeClosed, beforeCounted := closed(), counted()

	bystander, c := dialRaw(t, addr), dialRaw(t, addr)
	del := kmsg.NewPtrDeleteShareGroupStateRequest()
	del.GroupID = "g"
	del.Topics = []kmsg.DeleteShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.DeleteShareGroupStateRequestTopicPartition{{Partition: 1}}}}
	if _, err := c.Write(frameOf(del, 0, 1)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, c)
	waitFor(t, "the close to be counted", func() bool {
		return closed() == beforeClosed+1 && counted() == beforeCounted+1
	})
	expectAPIVersions(t, bystander)
	expectAPIVersions(t, dialRaw(t, addr))
}
