package kafkawire

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// The conversions of the five requests, both ways. *FromKmsg is what the sidecar does with a decoded
// request; *ToKmsg is what the client does before encoding one. The version of a *ToKmsg result is
// left at 0: the sender sets the version it negotiated.

// topicsFromKmsg converts a decoded message's per-topic partitions into sharestate's shape: split
// gives a topic's id and partitions, part converts one partition. Every *FromKmsg conversion of this
// package, requests and responses alike, has this shape; only the types and the per-partition fields
// differ.
func topicsFromKmsg[KT, KP, P any](topics []KT, split func(*KT) ([16]byte, []KP), part func(*KP) P) []sharestate.TopicData[P] {
	out := make([]sharestate.TopicData[P], len(topics))
	for i := range topics {
		id, kparts := split(&topics[i])
		parts := make([]P, len(kparts))
		for j := range kparts {
			parts[j] = part(&kparts[j])
		}
		out[i] = sharestate.TopicData[P]{TopicID: id, Partitions: parts}
	}
	return out
}

// initializeRequestFromKmsg converts a decoded InitializeShareGroupState request.
func initializeRequestFromKmsg(k *kmsg.InitializeShareGroupStateRequest) sharestate.InitializeRequest {
	return sharestate.InitializeRequest{GroupID: k.GroupID, Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.InitializeShareGroupStateRequestTopic) ([16]byte, []kmsg.InitializeShareGroupStateRequestTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.InitializeShareGroupStateRequestTopicPartition) sharestate.InitializePartition {
			return sharestate.InitializePartition{Partition: p.Partition, StateEpoch: p.StateEpoch, StartOffset: p.StartOffset}
		})}
}

// InitializeRequestToKmsg converts an Initialize request for the wire.
func InitializeRequestToKmsg(req sharestate.InitializeRequest) *kmsg.InitializeShareGroupStateRequest {
	k := kmsg.NewPtrInitializeShareGroupStateRequest()
	k.GroupID = req.GroupID
	k.Topics = make([]kmsg.InitializeShareGroupStateRequestTopic, len(req.Topics))
	for i, t := range req.Topics {
		kt := &k.Topics[i]
		kt.Default()
		kt.TopicID = t.TopicID
		kt.Partitions = make([]kmsg.InitializeShareGroupStateRequestTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			kp := &kt.Partitions[j]
			kp.Default()
			kp.Partition, kp.StateEpoch, kp.StartOffset = p.Partition, p.StateEpoch, p.StartOffset
		}
	}
	return k
}

// readRequestFromKmsg converts a decoded ReadShareGroupState request.
func readRequestFromKmsg(k *kmsg.ReadShareGroupStateRequest) sharestate.ReadRequest {
	return sharestate.ReadRequest{GroupID: k.GroupID, Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.ReadShareGroupStateRequestTopic) ([16]byte, []kmsg.ReadShareGroupStateRequestTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.ReadShareGroupStateRequestTopicPartition) sharestate.ReadPartition {
			return sharestate.ReadPartition{Partition: p.Partition, LeaderEpoch: p.LeaderEpoch}
		})}
}

// ReadRequestToKmsg converts a Read request for the wire.
func ReadRequestToKmsg(req sharestate.ReadRequest) *kmsg.ReadShareGroupStateRequest {
	k := kmsg.NewPtrReadShareGroupStateRequest()
	k.GroupID = req.GroupID
	k.Topics = make([]kmsg.ReadShareGroupStateRequestTopic, len(req.Topics))
	for i, t := range req.Topics {
		kt := &k.Topics[i]
		kt.Default()
		kt.TopicID = t.TopicID
		kt.Partitions = make([]kmsg.ReadShareGroupStateRequestTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			kp := &kt.Partitions[j]
			kp.Default()
			kp.Partition, kp.LeaderEpoch = p.Partition, p.LeaderEpoch
		}
	}
	return k
}

// writeRequestFromKmsg converts a decoded WriteShareGroupState request. A v0 request carries no
// delivery-complete count: kmsg's default, -1 ("unknown"), stands for it.
func writeRequestFromKmsg(k *kmsg.WriteShareGroupStateRequest) sharestate.WriteRequest {
	return sharestate.WriteRequest{GroupID: k.GroupID, Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.WriteShareGroupStateRequestTopic) ([16]byte, []kmsg.WriteShareGroupStateRequestTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.WriteShareGroupStateRequestTopicPartition) sharestate.WritePartition {
			return sharestate.WritePartition{
				Partition: p.Partition, StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset,
				DeliveryCompleteCount: p.DeliveryCompleteCount, StateBatches: writeBatchesFromKmsg(p.StateBatches),
			}
		})}
}

func writeBatchesFromKmsg(in []kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch) []sharestate.StateBatch {
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

// WriteRequestToKmsg converts a Write request for the wire. Sent as v0, the delivery-complete count
// is not encoded (the sidecar then keeps the stored one).
func WriteRequestToKmsg(req sharestate.WriteRequest) *kmsg.WriteShareGroupStateRequest {
	k := kmsg.NewPtrWriteShareGroupStateRequest()
	k.GroupID = req.GroupID
	k.Topics = make([]kmsg.WriteShareGroupStateRequestTopic, len(req.Topics))
	for i, t := range req.Topics {
		kt := &k.Topics[i]
		kt.Default()
		kt.TopicID = t.TopicID
		kt.Partitions = make([]kmsg.WriteShareGroupStateRequestTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			kp := &kt.Partitions[j]
			kp.Default()
			kp.Partition, kp.StateEpoch, kp.LeaderEpoch = p.Partition, p.StateEpoch, p.LeaderEpoch
			kp.StartOffset, kp.DeliveryCompleteCount = p.StartOffset, p.DeliveryCompleteCount
			kp.StateBatches = writeBatchesToKmsg(p.StateBatches)
		}
	}
	return k
}

func writeBatchesToKmsg(in []sharestate.StateBatch) []kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch {
	out := make([]kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch, len(in))
	for i, b := range in {
		out[i] = kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			FirstOffset: b.FirstOffset, LastOffset: b.LastOffset,
			DeliveryState: int8(b.DeliveryState), DeliveryCount: b.DeliveryCount,
		}
	}
	return out
}

// deleteRequestFromKmsg converts a decoded DeleteShareGroupState request.
func deleteRequestFromKmsg(k *kmsg.DeleteShareGroupStateRequest) sharestate.DeleteRequest {
	return sharestate.DeleteRequest{GroupID: k.GroupID, Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.DeleteShareGroupStateRequestTopic) ([16]byte, []kmsg.DeleteShareGroupStateRequestTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.DeleteShareGroupStateRequestTopicPartition) sharestate.DeletePartition {
			return sharestate.DeletePartition{Partition: p.Partition}
		})}
}

// DeleteRequestToKmsg converts a Delete request for the wire.
func DeleteRequestToKmsg(req sharestate.DeleteRequest) *kmsg.DeleteShareGroupStateRequest {
	k := kmsg.NewPtrDeleteShareGroupStateRequest()
	k.GroupID = req.GroupID
	k.Topics = make([]kmsg.DeleteShareGroupStateRequestTopic, len(req.Topics))
	for i, t := range req.Topics {
		kt := &k.Topics[i]
		kt.Default()
		kt.TopicID = t.TopicID
		kt.Partitions = make([]kmsg.DeleteShareGroupStateRequestTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			kp := &kt.Partitions[j]
			kp.Default()
			kp.Partition = p.Partition
		}
	}
	return k
}

// readSummaryRequestFromKmsg converts a decoded ReadShareGroupStateSummary request.
func readSummaryRequestFromKmsg(k *kmsg.ReadShareGroupStateSummaryRequest) sharestate.ReadSummaryRequest {
	return sharestate.ReadSummaryRequest{GroupID: k.GroupID, Topics: topicsFromKmsg(k.Topics,
		func(t *kmsg.ReadShareGroupStateSummaryRequestTopic) ([16]byte, []kmsg.ReadShareGroupStateSummaryRequestTopicPartition) {
			return t.TopicID, t.Partitions
		},
		func(p *kmsg.ReadShareGroupStateSummaryRequestTopicPartition) sharestate.ReadSummaryPartition {
			return sharestate.ReadSummaryPartition{Partition: p.Partition, LeaderEpoch: p.LeaderEpoch}
		})}
}

// ReadSummaryRequestToKmsg converts a ReadSummary request for the wire.
func ReadSummaryRequestToKmsg(req sharestate.ReadSummaryRequest) *kmsg.ReadShareGroupStateSummaryRequest {
	k := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	k.GroupID = req.GroupID
	k.Topics = make([]kmsg.ReadShareGroupStateSummaryRequestTopic, len(req.Topics))
	for i, t := range req.Topics {
		kt := &k.Topics[i]
		kt.Default()
		kt.TopicID = t.TopicID
		kt.Partitions = make([]kmsg.ReadShareGroupStateSummaryRequestTopicPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			kp := &kt.Partitions[j]
			kp.Default()
			kp.Partition, kp.LeaderEpoch = p.Partition, p.LeaderEpoch
		}
	}
	return k
}
