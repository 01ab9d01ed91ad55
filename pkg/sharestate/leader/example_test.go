package leader_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/leader"
)

// memStore is a sharestate.Store in memory, built from the model's public rules only: what a Go
// user of this package writes to run a share-partition leader without Kubernetes. (The sidecar's
// kafkawire.Client and the persister are the stores a broker uses.)
type memStore struct {
	mu     sync.Mutex
	states map[string]*sharestate.State
}

func newMemStore() *memStore { return &memStore{states: map[string]*sharestate.State{}} }

func key(group string, topic sharestate.TopicID, partition int32) string {
	return fmt.Sprintf("%s/%s/%d", group, topic, partition)
}

// answer answers every partition of req with fn, under the store's lock.
func answer[P, R any](s *memStore, req sharestate.Request[P], fn func(k string, topic sharestate.TopicID, p P) R) sharestate.Response[R] {
	s.mu.Lock()
	defer s.mu.Unlock()
	var resp sharestate.Response[R]
	for _, t := range req.Topics {
		out := sharestate.TopicData[R]{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			out.Partitions = append(out.Partitions, fn(req.GroupID, t.TopicID, p))
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

func (s *memStore) Initialize(_ context.Context, req sharestate.InitializeRequest) sharestate.InitializeResponse {
	return answer(s, req, func(group string, topic sharestate.TopicID, p sharestate.InitializePartition) sharestate.PartitionResult {
		k := key(group, topic, p.Partition)
		o := sharestate.CheckInitializeInput(topic, p)
		if o.OK() {
			var next sharestate.State
			if next, o = sharestate.ApplyInitialize(s.states[k], p, true); o.OK() {
				s.states[k] = &next
			}
		}
		return sharestate.PartitionResult{Partition: p.Partition, ErrorCode: o.Code, ErrorMessage: o.Message}
	})
}

func (s *memStore) Read(_ context.Context, req sharestate.ReadRequest) sharestate.ReadResponse {
	return answer(s, req, func(group string, topic sharestate.TopicID, p sharestate.ReadPartition) sharestate.ReadResult {
		k := key(group, topic, p.Partition)
		res := sharestate.ReadResult{PartitionResult: sharestate.PartitionResult{Partition: p.Partition}}
		o := sharestate.CheckReadInput(topic, p)
		if o.OK() {
			var next sharestate.State
			if next, _, o = sharestate.ApplyRead(s.states[k], p, true); o.OK() {
				s.states[k] = &next
				res.StateEpoch, res.StartOffset, res.StateBatches = next.StateEpoch, next.StartOffset, next.Batches
			}
		}
		res.ErrorCode, res.ErrorMessage = o.Code, o.Message
		return res
	})
}

func (s *memStore) Write(_ context.Context, req sharestate.WriteRequest) sharestate.WriteResponse {
	return answer(s, req, func(group string, topic sharestate.TopicID, p sharestate.WritePartition) sharestate.PartitionResult {
		k := key(group, topic, p.Partition)
		o := sharestate.CheckWriteInput(topic, p, sharestate.DefaultLimits)
		if o.OK() {
			var next sharestate.State
			if next, o = sharestate.ApplyWrite(s.states[k], p, true, sharestate.DefaultLimits); o.OK() {
				s.states[k] = &next
			}
		}
		return sharestate.PartitionResult{Partition: p.Partition, ErrorCode: o.Code, ErrorMessage: o.Message}
	})
}

func (s *memStore) Delete(_ context.Context, req sharestate.DeleteRequest) sharestate.DeleteResponse {
	return answer(s, req, func(group string, topic sharestate.TopicID, p sharestate.DeletePartition) sharestate.PartitionResult {
		delete(s.states, key(group, topic, p.Partition))
		return sharestate.PartitionResult{Partition: p.Partition}
	})
}

func (s *memStore) ReadSummary(_ context.Context, req sharestate.ReadSummaryRequest) sharestate.ReadSummaryResponse {
	return answer(s, req, func(group string, topic sharestate.TopicID, p sharestate.ReadSummaryPartition) sharestate.ReadSummaryResult {
		res := sharestate.SummaryOf(s.states[key(group, topic, p.Partition)])
		res.Partition = p.Partition
		return res
	})
}

// raiseStateEpoch does what the operator's fence does to a partition: it raises the state epoch.
func (s *memStore) raiseStateEpoch(group string, topic sharestate.TopicID, partition int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[key(group, topic, partition)].StateEpoch++
}

var _ sharestate.Store = (*memStore)(nil)

// A broker's share-partition leader on a store: records are fetched (acquired) and acknowledged.
// When the state epoch is raised under it (the operator's fence, or an offset reset), the store
// answers its next write FENCED_STATE_EPOCH: the member is told NOT_LEADER_OR_FOLLOWER, the
// share-partition is dropped, and the next fetch loads the state again at the new epoch, where the
// records the dropped one had handed out are available again (KAFKA-17002; docs/semantics.md §8).
func ExampleManager() {
	ctx := context.Background()
	topic := sharestate.MustParseTopicID("xtNPpBxbQIaPS6H5ZQbfJg")
	store := newMemStore()
	initialized := store.Initialize(ctx, sharestate.InitializeRequest{GroupID: "orders", Topics: []sharestate.TopicData[sharestate.InitializePartition]{
		{TopicID: topic, Partitions: []sharestate.InitializePartition{{Partition: 0, StateEpoch: 1, StartOffset: 0}}},
	}})
	fmt.Println("initialized:", initialized.Topics[0].Partitions[0].ErrorCode)
	spl, err := leader.NewManager(leader.ManagerOptions{
		Store:       store,
		LeaderEpoch: func(sharestate.TopicID, int32) (int32, bool) { return 1, true }, // this broker leads at leader epoch 1
	})
	if err != nil {
		panic(err)
	}

	fetch := func() sharestate.Response[leader.FetchResult] {
		return spl.Fetch(ctx, "member-1", sharestate.Request[leader.FetchPartition]{GroupID: "orders", Topics: []sharestate.TopicData[leader.FetchPartition]{
			{TopicID: topic, Partitions: []leader.FetchPartition{{Partition: 0, LogEndOffset: 10, MaxRecords: 4}}},
		}})
	}
	accept := func(first, last int64) sharestate.ErrorCode {
		resp := spl.Acknowledge(ctx, "member-1", sharestate.Request[leader.AcknowledgePartition]{GroupID: "orders", Topics: []sharestate.TopicData[leader.AcknowledgePartition]{
			{TopicID: topic, Partitions: []leader.AcknowledgePartition{{Partition: 0, Batches: []leader.AckBatch{{FirstOffset: first, LastOffset: last, Type: leader.AckAccept}}}}},
		}})
		return resp.Topics[0].Partitions[0].ErrorCode
	}

	got := fetch().Topics[0].Partitions[0]
	fmt.Println("fetched:", got.ErrorCode, got.Records)
	fmt.Println("accept 0-1:", accept(0, 1))

	store.raiseStateEpoch("orders", topic, 0)
	fmt.Println("accept 2-3 after the fence:", accept(2, 3))

	got = fetch().Topics[0].Partitions[0]
	fmt.Println("fetched again:", got.ErrorCode, got.Records)
	summary := store.ReadSummary(ctx, sharestate.ReadSummaryRequest{GroupID: "orders", Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{
		{TopicID: topic, Partitions: []sharestate.ReadSummaryPartition{{Partition: 0, LeaderEpoch: 1}}},
	}}).Topics[0].Partitions[0]
	fmt.Println("stored: state epoch", summary.StateEpoch, "start offset", summary.StartOffset)
	// Output:
	// initialized: NONE
	// fetched: NONE [{0 3 1}]
	// accept 0-1: NONE
	// accept 2-3 after the fence: NOT_LEADER_OR_FOLLOWER
	// fetched again: NONE [{2 5 1}]
	// stored: state epoch 2 start offset 2
}
