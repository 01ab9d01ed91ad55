package kafkawire

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

var (
	topicA = sharestate.TopicID{0xab, 1}
	topicB = sharestate.TopicID{0xcd, 2}
)

// wire encodes a kmsg message at a version and decodes it into a fresh one, as the other side does.
func wire[T interface {
	AppendTo([]byte) []byte
	ReadFrom([]byte) error
	SetVersion(int16)
}](t *testing.T, in T, fresh T, version int16) T {
	t.Helper()
	in.SetVersion(version)
	fresh.SetVersion(version)
	if err := fresh.ReadFrom(in.AppendTo(nil)); err != nil {
		t.Fatalf("v%d: %v", version, err)
	}
	return fresh
}

func check(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func TestRequestsSurviveTheWire(t *testing.T) {
	initReq := sharestate.InitializeRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.InitializePartition]{
		{TopicID: topicA, Partitions: []sharestate.InitializePartition{{Partition: 0, StateEpoch: 3, StartOffset: -1}, {Partition: 9, StateEpoch: 1, StartOffset: 1 << 40}}},
		{TopicID: topicB, Partitions: []sharestate.InitializePartition{{Partition: 2}}},
	}}
	check(t, "initialize", initializeRequestFromKmsg(wire(t, InitializeRequestToKmsg(initReq), kmsg.NewPtrInitializeShareGroupStateRequest(), 0)), initReq)

	readReq := sharestate.ReadRequest{GroupID: "grp", Topics: []sharestate.TopicData[sharestate.ReadPartition]{
		{TopicID: topicA, Partitions: []sharestate.ReadPartition{{Partition: 1, LeaderEpoch: 5}, {Partition: -1, LeaderEpoch: -1}}},
	}}
	check(t, "read", readRequestFromKmsg(wire(t, ReadRequestToKmsg(readReq), kmsg.NewPtrReadShareGroupStateRequest(), 0)), readReq)

	writeReq := sharestate.WriteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.WritePartition]{
		{TopicID: topicB, Partitions: []sharestate.WritePartition{
			{Partition: 4, StateEpoch: 2, LeaderEpoch: 3, StartOffset: 100, DeliveryCompleteCount: 7, StateBatches: []sharestate.StateBatch{
				{FirstOffset: 100, LastOffset: 104, DeliveryState: 2, DeliveryCount: 1}, {FirstOffset: 105, LastOffset: 105, DeliveryState: 4, DeliveryCount: 5}}},
			{Partition: 5, StartOffset: -1, DeliveryCompleteCount: -1},
		}},
	}}
	check(t, "write v1", writeRequestFromKmsg(wire(t, WriteRequestToKmsg(writeReq), kmsg.NewPtrWriteShareGroupStateRequest(), 1)), writeReq)
	// v0 has no delivery-complete count: it arrives as -1, "keep the stored one".
	v0 := writeRequestFromKmsg(wire(t, WriteRequestToKmsg(writeReq), kmsg.NewPtrWriteShareGroupStateRequest(), 0))
	if got := v0.Topics[0].Partitions[0].DeliveryCompleteCount; got != -1 {
		t.Fatalf("write v0 delivered a delivery-complete count of %d, want -1", got)
	}
	v0.Topics[0].Partitions[0].DeliveryCompleteCount = 7
	check(t, "write v0, apart from the count", v0, writeReq)

	delReq := sharestate.DeleteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.DeletePartition]{{TopicID: topicA, Partitions: []sharestate.DeletePartition{{Partition: 3}}}}}
	check(t, "delete", deleteRequestFromKmsg(wire(t, DeleteRequestToKmsg(delReq), kmsg.NewPtrDeleteShareGroupStateRequest(), 0)), delReq)

	sumReq := sharestate.ReadSummaryRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{{TopicID: topicA, Partitions: []sharestate.ReadSummaryPartition{{Partition: 3, LeaderEpoch: 4}}}}}
	for v := int16(0); v <= 1; v++ {
		check(t, "read summary", readSummaryRequestFromKmsg(wire(t, ReadSummaryRequestToKmsg(sumReq), kmsg.NewPtrReadShareGroupStateSummaryRequest(), v)), sumReq)
	}
}

func TestResponsesSurviveTheWire(t *testing.T) {
	results := sharestate.Response[sharestate.PartitionResult]{Topics: []sharestate.TopicData[sharestate.PartitionResult]{
		{TopicID: topicA, Partitions: []sharestate.PartitionResult{{Partition: 0}, {Partition: 1, ErrorCode: sharestate.ErrFencedLeaderEpoch, ErrorMessage: "older"}}},
		{TopicID: topicB, Partitions: []sharestate.PartitionResult{{Partition: 2, ErrorCode: sharestate.ErrUnknownServerError, ErrorMessage: "x"}}},
	}}
	check(t, "initialize", InitializeResponseFromKmsg(wire(t, initializeResponseToKmsg(results), kmsg.NewPtrInitializeShareGroupStateResponse(), 0)), results)
	for v := int16(0); v <= 1; v++ {
		check(t, "write", WriteResponseFromKmsg(wire(t, writeResponseToKmsg(results), kmsg.NewPtrWriteShareGroupStateResponse(), v)), results)
	}
	check(t, "delete", DeleteResponseFromKmsg(wire(t, deleteResponseToKmsg(results), kmsg.NewPtrDeleteShareGroupStateResponse(), 0)), results)

	read := sharestate.ReadResponse{Topics: []sharestate.TopicData[sharestate.ReadResult]{{TopicID: topicA, Partitions: []sharestate.ReadResult{
		{PartitionResult: sharestate.PartitionResult{Partition: 1}, StateEpoch: 3, StartOffset: 10, StateBatches: []sharestate.StateBatch{{FirstOffset: 10, LastOffset: 12, DeliveryState: 3, DeliveryCount: 2}}},
		{PartitionResult: sharestate.PartitionResult{Partition: 2, ErrorCode: sharestate.ErrInvalidRequest, ErrorMessage: "uninitialized"}},
	}}}}
	check(t, "read", ReadResponseFromKmsg(wire(t, readResponseToKmsg(read), kmsg.NewPtrReadShareGroupStateResponse(), 0)), read)

	summary := sharestate.ReadSummaryResponse{Topics: []sharestate.TopicData[sharestate.ReadSummaryResult]{{TopicID: topicB, Partitions: []sharestate.ReadSummaryResult{
		{PartitionResult: sharestate.PartitionResult{Partition: 7}, StateEpoch: 2, LeaderEpoch: 5, StartOffset: 99, DeliveryCompleteCount: 40},
	}}}}
	check(t, "read summary v1", ReadSummaryResponseFromKmsg(wire(t, readSummaryResponseToKmsg(summary), kmsg.NewPtrReadShareGroupStateSummaryResponse(), 1)), summary)
	// v0 carries no delivery-complete count: the client reads -1, unknown.
	v0 := ReadSummaryResponseFromKmsg(wire(t, readSummaryResponseToKmsg(summary), kmsg.NewPtrReadShareGroupStateSummaryResponse(), 0))
	if got := v0.Topics[0].Partitions[0].DeliveryCompleteCount; got != -1 {
		t.Fatalf("read summary v0 delivered a delivery-complete count of %d, want -1", got)
	}
}

// An empty message is null on the wire, as Kafka sends it on success.
func TestEmptyErrorMessageIsNull(t *testing.T) {
	k := writeResponseToKmsg(sharestate.WriteResponse{Topics: []sharestate.TopicData[sharestate.PartitionResult]{{Partitions: []sharestate.PartitionResult{{Partition: 1}}}}})
	if m := k.Topics[0].Partitions[0].ErrorMessage; m != nil {
		t.Fatalf("error message %q, want null", *m)
	}
}

func TestNegotiate(t *testing.T) {
	got := negotiate([]kmsg.ApiVersionsResponseApiKey{
		{ApiKey: KeyAPIVersions, MinVersion: 0, MaxVersion: 9},
		{ApiKey: KeyWriteShareGroupState, MinVersion: 0, MaxVersion: 0}, // an older sidecar: v0 only
		{ApiKey: KeyReadShareGroupStateSummary, MinVersion: 0, MaxVersion: 5},
		{ApiKey: KeyReadShareGroupState, MinVersion: 3, MaxVersion: 4}, // nothing in common
		{ApiKey: 0, MinVersion: 0, MaxVersion: 11},                     // Produce: not ours
	})
	check(t, "negotiated", got, map[int16]int16{KeyAPIVersions: 4, KeyWriteShareGroupState: 0, KeyReadShareGroupStateSummary: 1})
}

// align puts a foreign server's answers in the request's order and fills in what it left out.
func TestAlign(t *testing.T) {
	req := sharestate.WriteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.WritePartition]{
		{TopicID: topicA, Partitions: []sharestate.WritePartition{{Partition: 1}, {Partition: 2}}},
		{TopicID: topicB, Partitions: []sharestate.WritePartition{{Partition: 3}}},
	}}
	resp := sharestate.WriteResponse{Topics: []sharestate.TopicData[sharestate.PartitionResult]{
		{TopicID: topicB, Partitions: []sharestate.PartitionResult{{Partition: 3, ErrorCode: sharestate.ErrFencedStateEpoch}}},
		{TopicID: topicA, Partitions: []sharestate.PartitionResult{{Partition: 1}}},
	}}
	got := align(writeOp, req, resp)
	codes := [][]sharestate.ErrorCode{}
	for _, topic := range got.Topics {
		var c []sharestate.ErrorCode
		for _, p := range topic.Partitions {
			c = append(c, p.ErrorCode)
		}
		codes = append(codes, c)
	}
	check(t, "codes in request order", codes, [][]sharestate.ErrorCode{
		{sharestate.ErrNone, sharestate.ErrUnknownServerError}, {sharestate.ErrFencedStateEpoch},
	})
	if got.Topics[0].Partitions[1].Partition != 2 || got.Topics[1].TopicID != topicB {
		t.Fatalf("aligned %+v", got)
	}
	inOrder := sharestate.WriteResponse{Topics: []sharestate.TopicData[sharestate.PartitionResult]{
		{TopicID: topicA, Partitions: []sharestate.PartitionResult{{Partition: 1}, {Partition: 2}}},
		{TopicID: topicB, Partitions: []sharestate.PartitionResult{{Partition: 3}}},
	}}
	check(t, "an answer in order is kept", align(writeOp, req, inOrder), inOrder)
}
