package kafkawire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// fuzzRequest is the request every fuzzed response is aligned to.
var fuzzRequest = sharestate.WriteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.WritePartition]{
	{TopicID: topicA, Partitions: []sharestate.WritePartition{{Partition: 0}, {Partition: 1}}},
}}

// FuzzResponse feeds arbitrary bytes to the client's reading of a response, for every API and
// version it speaks: the header check, kmsg's decoder, the conversion and the alignment to the
// request. None may panic, and an aligned answer always has the request's shape.
func FuzzResponse(f *testing.F) {
	ok := writeResponseToKmsg(sharestate.WriteResponse{Topics: []sharestate.TopicData[sharestate.PartitionResult]{
		{TopicID: topicA, Partitions: []sharestate.PartitionResult{{Partition: 1, ErrorCode: 74, ErrorMessage: "m"}}},
	}})
	f.Add(KeyWriteShareGroupState, int16(1), append([]byte{0, 0, 0, 1, 0}, ok.AppendTo(nil)...))
	read := readResponseToKmsg(sharestate.ReadResponse{Topics: []sharestate.TopicData[sharestate.ReadResult]{
		{TopicID: topicA, Partitions: []sharestate.ReadResult{{StateBatches: []sharestate.StateBatch{{LastOffset: 4}}}}},
	}})
	f.Add(KeyReadShareGroupState, int16(0), append([]byte{0, 0, 0, 1, 0}, read.AppendTo(nil)...))
	f.Add(KeyReadShareGroupStateSummary, int16(1), []byte{0, 0, 0, 1, 0, 2, 0xab, 1})
	f.Add(KeyAPIVersions, int16(3), []byte{0, 0, 0, 0, 0, 35})
	f.Fuzz(func(t *testing.T, key, version int16, frame []byte) {
		api, known := LookupAPI(key)
		if !known || !api.Supports(version) {
			return
		}
		body, err := responseBody(frame, 1, key != KeyAPIVersions)
		if err != nil {
			return
		}
		if key == KeyAPIVersions {
			resp := kmsg.ApiVersionsResponse{Version: version}
			if resp.ReadFrom(body) == nil {
				negotiate(resp.ApiKeys)
			}
			return
		}
		decodeAny(t, key, version, body)
	})
}

// decodeAny decodes a share-state response body and converts it as the client does.
func decodeAny(t *testing.T, key, version int16, body []byte) {
	switch key {
	case KeyInitializeShareGroupState:
		decodeAligned(t, initializeOp, version, body, sharestate.InitializeRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.InitializePartition]{
			{TopicID: topicA, Partitions: []sharestate.InitializePartition{{Partition: 0}}}}})
	case KeyReadShareGroupState:
		decodeAligned(t, readOp, version, body, sharestate.ReadRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadPartition]{
			{TopicID: topicA, Partitions: []sharestate.ReadPartition{{Partition: 0}}}}})
	case KeyWriteShareGroupState:
		decodeAligned(t, writeOp, version, body, fuzzRequest)
	case KeyDeleteShareGroupState:
		decodeAligned(t, deleteOp, version, body, sharestate.DeleteRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.DeletePartition]{
			{TopicID: topicA, Partitions: []sharestate.DeletePartition{{Partition: 0}}}}})
	case KeyReadShareGroupStateSummary:
		decodeAligned(t, readSummaryOp, version, body, sharestate.ReadSummaryRequest{GroupID: "g", Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{
			{TopicID: topicA, Partitions: []sharestate.ReadSummaryPartition{{Partition: 0}, {Partition: 1}}}}})
	}
}

func decodeAligned[K kmsg.Request, P, R any](t *testing.T, op operation[K, P, R], version int16, body []byte, req sharestate.Request[P]) {
	kreq := op.requestToKmsg(req)
	kreq.SetVersion(version)
	resp := kreq.ResponseKind()
	if resp.ReadFrom(body) != nil {
		return
	}
	got := align(op, req, op.responseFromKmsg(resp))
	if len(got.Topics) != len(req.Topics) {
		t.Fatalf("%d topics answered for %d asked", len(got.Topics), len(req.Topics))
	}
	for i, topic := range req.Topics {
		if len(got.Topics[i].Partitions) != len(topic.Partitions) {
			t.Fatalf("topic %d: %d partitions answered for %d asked", i, len(got.Topics[i].Partitions), len(topic.Partitions))
		}
		for j, p := range topic.Partitions {
			if op.outcome(got.Topics[i].Partitions[j]).Partition != op.inputPart(p) {
				t.Fatalf("topic %d answer %d is for another partition", i, j)
			}
		}
	}
}
