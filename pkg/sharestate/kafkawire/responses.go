package kafkawire

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// The conversions of the five responses, both ways. *ToKmsg is what the sidecar encodes (it sets the
// version the request came with); *FromKmsg is what the client makes of a decoded response. An empty
// error message travels as null, as Kafka sends it on success.

func messageToKmsg(m string) *string {
	if m == "" {
		return nil
	}
	return &m
}

func messageFromKmsg(m *string) string {
	if m == nil {
		return ""
	}
	return *m
}

// partitionResultsToKmsg converts the results of the three operations that answer only an error
// (Initialize, Write, Delete), through mk, which builds kmsg's partition type of each.
func partitionResultsToKmsg[K any](in []sharestate.PartitionResult, mk func(partition int32, code int16, msg *string) K) []K {
	out := make([]K, len(in))
	for i, r := range in {
		out[i] = mk(r.Partition, int16(r.ErrorCode), messageToKmsg(r.ErrorMessage))
	}
	return out
}

func partitionResult(partition int32, code int16, msg *string) sharestate.PartitionResult {
	return sharestate.PartitionResult{Partition: partition, ErrorCode: sharestate.ErrorCode(code), ErrorMessage: messageFromKmsg(msg)}
}

// initializeResponseToKmsg converts an Initialize response for the wire.
func initializeResponseToKmsg(resp sharestate.InitializeResponse) *kmsg.InitializeShareGroupStateResponse {
	k := kmsg.NewPtrInitializeShareGroupStateResponse()
	k.Topics = make([]kmsg.InitializeShareGroupStateResponseTopic, len(resp.Topics))
	for i, t := range resp.Topics {
		k.Topics[i] = kmsg.InitializeShareGroupStateResponseTopic{TopicID: t.TopicID, Partitions: partitionResultsToKmsg(t.Partitions,
			func(p int32, c int16, m *string) kmsg.InitializeShareGroupStateResponseTopicPartition {
				return kmsg.InitializeShareGroupStateResponseTopicPartition{Partition: p, ErrorCode: c, ErrorMessage: m}
			})}
	}
	return k
}

// InitializeResponseFromKmsg converts a decoded InitializeShareGroupState response.
func InitializeResponseFromKmsg(k *kmsg.InitializeShareGroupStateResponse) sharestate.InitializeResponse {
	return sharestate.InitializeResponse{Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.InitializeShareGroupStateResponseTopic) ([16]byte, []kmsg.InitializeShareGroupStateResponseTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.InitializeShareGroupStateResponseTopicPartition) sharestate.PartitionResult {
			return partitionResult(p.Partition, p.ErrorCode, p.ErrorMessage)
		})}
}

// readResponseToKmsg converts a Read response for the wire.
func readResponseToKmsg(resp sharestate.ReadResponse) *kmsg.ReadShareGroupStateResponse {
	k := kmsg.NewPtrReadShareGroupStateResponse()
	k.Topics = make([]kmsg.ReadShareGroupStateResponseTopic, len(resp.Topics))
	for i, t := range resp.Topics {
		kt := &k.Topics[i]
		kt.TopicID = t.TopicID
		kt.Partitions = make([]kmsg.ReadShareGroupStateResponseTopicPartition, len(t.Partitions))
		for j, r := range t.Partitions {
			kt.Partitions[j] = kmsg.ReadShareGroupStateResponseTopicPartition{
				Partition: r.Partition, ErrorCode: int16(r.ErrorCode), ErrorMessage: messageToKmsg(r.ErrorMessage),
				StateEpoch: r.StateEpoch, StartOffset: r.StartOffset, StateBatches: readBatchesToKmsg(r.StateBatches),
			}
		}
	}
	return k
}

func readBatchesToKmsg(in []sharestate.StateBatch) []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch {
	out := make([]kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch, len(in))
	for i, b := range in {
		out[i] = kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{
			FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
			DeliveryState: int8(b.DeliveryState), DeliveryCount: b.DeliveryCount,
		}
	}
	return out
}

// ReadResponseFromKmsg converts a decoded ReadShareGroupState response.
func ReadResponseFromKmsg(k *kmsg.ReadShareGroupStateResponse) sharestate.ReadResponse {
	return sharestate.ReadResponse{Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.ReadShareGroupStateResponseTopic) ([16]byte, []kmsg.ReadShareGroupStateResponseTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.ReadShareGroupStateResponseTopicPartition) sharestate.ReadResult {
			return sharestate.ReadResult{
				PartitionResult: partitionResult(p.Partition, p.ErrorCode, p.ErrorMessage),
				StateEpoch:      p.StateEpoch, StartOffset: p.StartOffset, StateBatches: readBatchesFromKmsg(p.StateBatches),
			}
		})}
}

func readBatchesFromKmsg(in []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch) []sharestate.StateBatch {
	if len(in) == 0 {
		return nil
	}
	out := make([]sharestate.StateBatch, len(in))
	for i, b := range in {
		out[i] = sharestate.StateBatch{
			FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
			DeliveryState: sharestate.DeliveryState(b.DeliveryState), DeliveryCount: b.DeliveryCount,
		}
	}
	return out
}

// writeResponseToKmsg converts a Write response for the wire.
func writeResponseToKmsg(resp sharestate.WriteResponse) *kmsg.WriteShareGroupStateResponse {
	k := kmsg.NewPtrWriteShareGroupStateResponse()
	k.Topics = make([]kmsg.WriteShareGroupStateResponseTopic, len(resp.Topics))
	for i, t := range resp.Topics {
		k.Topics[i] = kmsg.WriteShareGroupStateResponseTopic{TopicID: t.TopicID, Partitions: partitionResultsToKmsg(t.Partitions,
			func(p int32, c int16, m *string) kmsg.WriteShareGroupStateResponseTopicPartition {
				return kmsg.WriteShareGroupStateResponseTopicPartition{Partition: p, ErrorCode: c, ErrorMessage: m}
			})}
	}
	return k
}

// WriteResponseFromKmsg converts a decoded WriteShareGroupState response.
func WriteResponseFromKmsg(k *kmsg.WriteShareGroupStateResponse) sharestate.WriteResponse {
	return sharestate.WriteResponse{Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.WriteShareGroupStateResponseTopic) ([16]byte, []kmsg.WriteShareGroupStateResponseTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.WriteShareGroupStateResponseTopicPartition) sharestate.PartitionResult {
			return partitionResult(p.Partition, p.ErrorCode, p.ErrorMessage)
		})}
}

// deleteResponseToKmsg converts a Delete response for the wire.
func deleteResponseToKmsg(resp sharestate.DeleteResponse) *kmsg.DeleteShareGroupStateResponse {
	k := kmsg.NewPtrDeleteShareGroupStateResponse()
	k.Topics = make([]kmsg.DeleteShareGroupStateResponseTopic, len(resp.Topics))
	for i, t := range resp.Topics {
		k.Topics[i] = kmsg.DeleteShareGroupStateResponseTopic{TopicID: t.TopicID, Partitions: partitionResultsToKmsg(t.Partitions,
			func(p int32, c int16, m *string) kmsg.DeleteShareGroupStateResponseTopicPartition {
				return kmsg.DeleteShareGroupStateResponseTopicPartition{Partition: p, ErrorCode: c, ErrorMessage: m}
			})}
	}
	return k
}

// DeleteResponseFromKmsg converts a decoded DeleteShareGroupState response.
func DeleteResponseFromKmsg(k *kmsg.DeleteShareGroupStateResponse) sharestate.DeleteResponse {
	return sharestate.DeleteResponse{Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.DeleteShareGroupStateResponseTopic) ([16]byte, []kmsg.DeleteShareGroupStateResponseTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.DeleteShareGroupStateResponseTopicPartition) sharestate.PartitionResult {
			return partitionResult(p.Partition, p.ErrorCode, p.ErrorMessage)
		})}
}

// readSummaryResponseToKmsg converts a ReadSummary response for the wire. Encoded as v0, the
// delivery-complete count is left out.
func readSummaryResponseToKmsg(resp sharestate.ReadSummaryResponse) *kmsg.ReadShareGroupStateSummaryResponse {
	k := kmsg.NewPtrReadShareGroupStateSummaryResponse()
	k.Topics = make([]kmsg.ReadShareGroupStateSummaryResponseTopic, len(resp.Topics))
	for i, t := range resp.Topics {
		kt := &k.Topics[i]
		kt.TopicID = t.TopicID
		kt.Partitions = make([]kmsg.ReadShareGroupStateSummaryResponseTopicPartition, len(t.Partitions))
		for j, r := range t.Partitions {
			kt.Partitions[j] = kmsg.ReadShareGroupStateSummaryResponseTopicPartition{
				Partition: r.Partition, ErrorCode: int16(r.ErrorCode), ErrorMessage: messageToKmsg(r.ErrorMessage),
				StateEpoch: r.StateEpoch, LeaderEpoch: r.LeaderEpoch, StartOffset: r.StartOffset,
				DeliveryCompleteCount: r.DeliveryCompleteCount,
			}
		}
	}
	return k
}

// ReadSummaryResponseFromKmsg converts a decoded ReadShareGroupStateSummary response. A v0 response
// carries no delivery-complete count: it reads as -1, unknown.
func ReadSummaryResponseFromKmsg(k *kmsg.ReadShareGroupStateSummaryResponse) sharestate.ReadSummaryResponse {
	return sharestate.ReadSummaryResponse{Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.ReadShareGroupStateSummaryResponseTopic) ([16]byte, []kmsg.ReadShareGroupStateSummaryResponseTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.ReadShareGroupStateSummaryResponseTopicPartition) sharestate.ReadSummaryResult {
			return sharestate.ReadSummaryResult{
				PartitionResult: partitionResult(p.Partition, p.ErrorCode, p.ErrorMessage),
				StateEpoch:      p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset,
				DeliveryCompleteCount: p.DeliveryCompleteCount,
			}
		})}
}
