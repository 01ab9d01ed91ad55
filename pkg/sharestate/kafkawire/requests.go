package kafkawire

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// The conversions of the five requests, both ways. *FromKmsg is what the sidecar does with a decoded
// request; *ToKmsg is what the client does before encoding one. The version of a *ToKmsg result is
// left at 0: the sender sets the version it negotiated.

// InitializeRequestFromKmsg converts a decoded InitializeShareGroupState request.
func InitializeRequestFromKmsg(k *kmsg.InitializeShareGroupStateRequest) sharestate.InitializeRequest {
	req := sharestate.InitializeRequest{GroupID: k.GroupID, Topics: make([]sharestate.TopicData[sharestate.InitializePartition], len(k.Topics))}
	for i := range k.Topics {
		t := &k.Topics[i]
		parts := make([]sharestate.InitializePartition, len(t.Partitions))
		for j, p := range t.Partitions {
			parts[j] = sharestate.InitializePartition{Partition: p.Partition, StateEpoch: p.StateEpoch, StartOffset: p.StartOffset}
		}
		req.Topics[i] = sharestate.TopicData[sharestate.InitializePartition]{TopicID: t.TopicID, Partitions: parts}
	}
	return req
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

// ReadRequestFromKmsg converts a decoded ReadShareGroupState request.
func ReadRequestFromKmsg(k *kmsg.ReadShareGroupStateRequest) sharestate.ReadRequest {
	req := sharestate.ReadRequest{GroupID: k.GroupID, Topics: make([]sharestate.TopicData[sharestate.ReadPartition], len(k.Topics))}
	for i := range k.Topics {
		t := &k.Topics[i]
		parts := make([]sharestate.ReadPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			parts[j] = sharestate.ReadPartition{Partition: p.Partition, LeaderEpoch: p.LeaderEpoch}
		}
		req.Topics[i] = sharestate.TopicData[sharestate.ReadPartition]{TopicID: t.TopicID, Partitions: parts}
	}
	return req
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

// WriteRequestFromKmsg converts a decoded WriteShareGroupState request. A v0 request carries no
// delivery-complete count: kmsg's default, -1 ("unknown"), stands for it.
func WriteRequestFromKmsg(k *kmsg.WriteShareGroupStateRequest) sharestate.WriteRequest {
	req := sharestate.WriteRequest{GroupID: k.GroupID, Topics: make([]sharestate.TopicData[sharestate.WritePartition], len(k.Topics))}
	for i := range k.Topics {
		t := &k.Topics[i]
		parts := make([]sharestate.WritePartition, len(t.Partitions))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			parts[j] = sharestate.WritePartition{
				Partition: p.Partition, StateEpoch: p.StateEpoch, LeaderEpoch: p.LeaderEpoch, StartOffset: p.StartOffset,
				DeliveryCompleteCount: p.DeliveryCompleteCount, StateBatches: writeBatchesFromKmsg(p.StateBatches),
			}
		}
		req.Topics[i] = sharestate.TopicData[sharestate.WritePartition]{TopicID: t.TopicID, Partitions: parts}
	}
	return req
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

// DeleteRequestFromKmsg converts a decoded DeleteShareGroupState request.
func DeleteRequestFromKmsg(k *kmsg.DeleteShareGroupStateRequest) sharestate.DeleteRequest {
	req := sharestate.DeleteRequest{GroupID: k.GroupID, Topics: make([]sharestate.TopicData[sharestate.DeletePartition], len(k.Topics))}
	for i := range k.Topics {
		t := &k.Topics[i]
		parts := make([]sharestate.DeletePartition, len(t.Partitions))
		for j, p := range t.Partitions {
			parts[j] = sharestate.DeletePartition{Partition: p.Partition}
		}
		req.Topics[i] = sharestate.TopicData[sharestate.DeletePartition]{TopicID: t.TopicID, Partitions: parts}
	}
	return req
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

// ReadSummaryRequestFromKmsg converts a decoded ReadShareGroupStateSummary request.
func ReadSummaryRequestFromKmsg(k *kmsg.ReadShareGroupStateSummaryRequest) sharestate.ReadSummaryRequest {
	req := sharestate.ReadSummaryRequest{GroupID: k.GroupID, Topics: make([]sharestate.TopicData[sharestate.ReadSummaryPartition], len(k.Topics))}
	for i := range k.Topics {
		t := &k.Topics[i]
		parts := make([]sharestate.ReadSummaryPartition, len(t.Partitions))
		for j, p := range t.Partitions {
			parts[j] = sharestate.ReadSummaryPartition{Partition: p.Partition, LeaderEpoch: p.LeaderEpoch}
		}
		req.Topics[i] = sharestate.TopicData[sharestate.ReadSummaryPartition]{TopicID: t.TopicID, Partitions: parts}
	}
	return req
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
