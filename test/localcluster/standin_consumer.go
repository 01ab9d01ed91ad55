package localcluster

import (
	"context"
	"time"

	"github.com/go-logr/logr"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/leader"
)

// This file is the stand-in broker's share-partition leader and its one share consumer. Each round,
// every partition's log grows by recordsPerRound; the consumer acknowledges what it acquired in the
// round before and acquires up to maxRecordsPerFetch more. So there are always records in flight,
// and each acknowledgement is a Write the SharePartitionStates show.
const (
	recordsPerRound    = 5
	maxRecordsPerFetch = 8
)

// standInConsumer is the stand-in's leader (a leader.Manager) and the consumer it serves.
type standInConsumer struct {
	mgr        *leader.Manager
	groupID    string
	topic      sharestate.TopicID
	partitions []int32
	log        logr.Logger

	logEnd map[int32]int64                    // each partition's log end offset: the log grows each round
	held   map[int32][]leader.AcquiredRecords // acquired in the last round, acknowledged in the next
	answer map[int32]sharestate.ErrorCode     // each partition's last answer, logged when it changes
}

// newStandInConsumer leads the partitions of summaries at a leader epoch above every stored one, as a
// new leadership from Kafka's controller would be, with the group's settings.
func newStandInConsumer(store sharestate.Store, group *sharestatev1.ShareGroup, topic sharestate.TopicID,
	summaries []sharestate.ReadSummaryResult, log logr.Logger) (*standInConsumer, error) {
	c := &standInConsumer{groupID: string(group.Spec.GroupID), topic: topic, log: log,
		logEnd: map[int32]int64{}, held: map[int32][]leader.AcquiredRecords{}, answer: map[int32]sharestate.ErrorCode{}}
	epoch := int32(0)
	for _, s := range summaries {
		c.partitions = append(c.partitions, s.Partition)
		c.logEnd[s.Partition] = max(s.StartOffset, 0)
		epoch = max(epoch, s.LeaderEpoch+1)
	}
	mgr, err := leader.NewManager(leader.ManagerOptions{
		Store:       store,
		LeaderEpoch: func(sharestate.TopicID, int32) (int32, bool) { return epoch, true },
		// The leader logs each refusal of each round; note tells the story once.
		Partition: partitionOptions(group.Spec.Settings, log.V(1)),
	})
	if err != nil {
		return nil, err
	}
	c.mgr = mgr
	return c, nil
}

// partitionOptions are the share-partition settings a broker would have for the group: the ones the
// ShareGroup documents, Kafka's defaults for the rest.
func partitionOptions(s *sharestatev1.ShareGroupSettings, log logr.Logger) leader.SharePartitionOptions {
	o := leader.SharePartitionOptions{Logger: log}
	if s == nil {
		return o
	}
	if s.DeliveryCountLimit != nil {
		o.MaxDeliveryCount = int(*s.DeliveryCountLimit)
	}
	if s.RecordLockDurationMs != nil {
		o.RecordLockDuration = time.Duration(*s.RecordLockDurationMs) * time.Millisecond
	}
	if s.MaxRecordLocks != nil {
		o.MaxRecordLocks = int(*s.MaxRecordLocks)
	}
	if s.AutoOffsetReset == sharestatev1.AutoOffsetResetLatest {
		o.AutoOffsetReset = leader.OffsetResetLatest
	}
	return o
}

// run plays a round every interval until ctx ends.
func (c *standInConsumer) run(ctx context.Context, interval time.Duration) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		c.acknowledge(ctx)
		c.fetch(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// acknowledge acknowledges the records acquired in the last round (ackBatches says how).
func (c *standInConsumer) acknowledge(ctx context.Context) {
	req := sharestate.Request[leader.AcknowledgePartition]{GroupID: c.groupID, Topics: []sharestate.TopicData[leader.AcknowledgePartition]{{TopicID: c.topic}}}
	for _, p := range c.partitions {
		if batches := ackBatches(c.held[p]); len(batches) > 0 {
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, leader.AcknowledgePartition{Partition: p, Batches: batches})
		}
	}
	clear(c.held)
	if len(req.Topics[0].Partitions) == 0 {
		return
	}
	for _, r := range c.mgr.Acknowledge(ctx, standInMember, req).Topics[0].Partitions {
		c.note(ctx, r)
	}
}

// fetch grows each partition's log and acquires records from it.
func (c *standInConsumer) fetch(ctx context.Context) {
	req := sharestate.Request[leader.FetchPartition]{GroupID: c.groupID, Topics: []sharestate.TopicData[leader.FetchPartition]{{TopicID: c.topic}}}
	for _, p := range c.partitions {
		end := c.logEnd[p]
		if sp := c.mgr.SharePartition(leader.SharePartitionKey{GroupID: c.groupID, TopicID: c.topic, Partition: p}); sp != nil {
			end = max(end, sp.StartOffset()) // a reset may have moved the start past the log's end
		}
		c.logEnd[p] = end + recordsPerRound
		req.Topics[0].Partitions = append(req.Topics[0].Partitions,
			leader.FetchPartition{Partition: p, LogStartOffset: 0, LogEndOffset: c.logEnd[p], MaxRecords: maxRecordsPerFetch})
	}
	for _, r := range c.mgr.Fetch(ctx, standInMember, req).Topics[0].Partitions {
		c.held[r.Partition] = r.Records
		c.note(ctx, r.PartitionResult)
	}
}

// note logs a partition's answer when it differs from the last one: the stand-in's story is when it
// leads, when it is refused and why.
func (c *standInConsumer) note(ctx context.Context, r sharestate.PartitionResult) {
	if last, answered := c.answer[r.Partition]; ctx.Err() != nil || answered && last == r.ErrorCode {
		return
	}
	c.answer[r.Partition] = r.ErrorCode
	key := leader.SharePartitionKey{GroupID: c.groupID, TopicID: c.topic, Partition: r.Partition}
	if r.ErrorCode == sharestate.ErrNone {
		sp := c.mgr.SharePartition(key)
		if sp == nil {
			return
		}
		c.log.Info("Leading the share-partition", "partition", r.Partition, "leaderEpoch", sp.LeaderEpoch(),
			"stateEpoch", sp.StateEpoch(), "startOffset", sp.StartOffset())
		return
	}
	c.log.Info("The share-partition's leader was refused", "partition", r.Partition, "answer", r.ErrorCode.String(), "reason", r.ErrorMessage)
}

// ackBatches says how the consumer acknowledges records, by offset, so that the stored state holds
// each kind: most are accepted (ACKNOWLEDGED), every tenth is released once (AVAILABLE, and delivered
// again with a higher delivery count), every 25th is rejected (ARCHIVED), and every 50th is never
// acknowledged, as if the consumer failed on it: its acquisition lock times out, it is delivered
// again up to the group's delivery count limit and then archived, and meanwhile the start offset
// waits for it while the records after it are acknowledged.
func ackBatches(records []leader.AcquiredRecords) []leader.AckBatch {
	var out []leader.AckBatch
	for _, r := range records {
		for off := r.FirstOffset; off <= r.LastOffset; off++ {
			t, ack := ackType(off, r.DeliveryCount)
			if !ack {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Type == t && out[n-1].LastOffset == off-1 {
				out[n-1].LastOffset = off
				continue
			}
			out = append(out, leader.AckBatch{FirstOffset: off, LastOffset: off, Type: t})
		}
	}
	return out
}

// ackType is how the record at offset, in its deliveryCount-th delivery, is acknowledged; ack is false
// for one that is not (ackBatches).
func ackType(offset int64, deliveryCount int16) (t leader.AckType, ack bool) {
	switch {
	case offset%50 == 21:
		return 0, false
	case offset%25 == 13:
		return leader.AckReject, true
	case offset%10 == 7 && deliveryCount == 1:
		return leader.AckRelease, true
	default:
		return leader.AckAccept, true
	}
}
