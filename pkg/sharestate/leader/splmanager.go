package leader

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/internal/fanout"
)

// This file is the share-partition leader's manager (Kafka's SharePartitionManager): the cache of a
// broker's SharePartitions and the fetch, acknowledge and release requests of its clients, answered
// per partition (semantics §8).

// ManagerOptions configure a Manager. Store and LeaderEpoch are required.
type ManagerOptions struct {
	// Store is the persister: in process (*Persister) or over the sidecar's wire protocol.
	Store sharestate.Store
	// LeaderEpoch returns the partition's current leader epoch, and whether this broker leads it. A
	// SharePartition is created with the epoch it returns, and replaced when it changes.
	LeaderEpoch func(topic sharestate.TopicID, partition int32) (epoch int32, leader bool)
	// Partition configures every SharePartition.
	Partition SharePartitionOptions
	// ExpiryInterval is how often Run looks for expired acquisition locks (default 1s).
	ExpiryInterval time.Duration
	// Logger receives what the manager swallows (default: Partition.Logger).
	Logger logr.Logger
}

// FetchPartition asks for records of one partition: up to MaxRecords of those below LogEndOffset.
// LogStartOffset and LogEndOffset also place a share-partition that has no start offset yet
// (share.auto.offset.reset).
type FetchPartition struct {
	Partition      int32
	LogStartOffset int64
	LogEndOffset   int64
	MaxRecords     int
}

// FetchResult answers a FetchPartition: an error code, or the records acquired for the member.
type FetchResult struct {
	sharestate.PartitionResult
	Records []AcquiredRecords
}

// AcknowledgePartition acknowledges records of one partition.
type AcknowledgePartition struct {
	Partition int32
	Batches   []AckBatch
}

// ReleasePartition releases every record a member holds on one partition.
type ReleasePartition struct {
	Partition int32
}

// Manager keeps a broker's SharePartitions, keyed by group, topic and partition, and answers its
// clients' requests per partition: one partition's error never fails the others. A SharePartition
// is created, and Reads its state, on the first fetch of its partition. One that is fenced, or failed
// to load, is removed at once; the next fetch creates a new one, which Reads the current epochs. It
// is safe for concurrent use.
type Manager struct {
	opts ManagerOptions
	log  logr.Logger

	mu         sync.Mutex // guards partitions; taken before a SharePartition's locks, never after
	partitions map[SharePartitionKey]*SharePartition
}

// NewManager returns a Manager with no SharePartitions.
func NewManager(opts ManagerOptions) (*Manager, error) {
	if opts.Store == nil {
		return nil, errors.New("sharestate: ManagerOptions.Store is required")
	}
	if opts.LeaderEpoch == nil {
		return nil, errors.New("sharestate: ManagerOptions.LeaderEpoch is required")
	}
	if err := opts.Partition.setDefaults(); err != nil {
		return nil, err
	}
	setDefault(&opts.ExpiryInterval, time.Second)
	if opts.Logger.GetSink() == nil {
		opts.Logger = opts.Partition.Logger
	}
	return &Manager{opts: opts, log: opts.Logger, partitions: map[SharePartitionKey]*SharePartition{}}, nil
}

// Fetch acquires records for member on each partition of the request. A partition whose
// share-partition is not loaded yet is loaded first; one whose fetch lock another fetch holds
// answers NONE with no records.
func (m *Manager) Fetch(ctx context.Context, member string, req sharestate.Request[FetchPartition]) sharestate.Response[FetchResult] {
	return fanout.Partitions(ctx, req, func(ctx context.Context, topic sharestate.TopicID, in FetchPartition) FetchResult {
		key := SharePartitionKey{GroupID: req.GroupID, TopicID: topic, Partition: in.Partition}
		records, err := m.fetch(ctx, key, member, in)
		return FetchResult{PartitionResult: resultOf(key.Partition, err), Records: records}
	})
}

func (m *Manager) fetch(ctx context.Context, key SharePartitionKey, member string, in FetchPartition) ([]AcquiredRecords, error) {
	sp, err := m.partition(key, true)
	if err != nil {
		return nil, err
	}
	if err := sp.Initialize(ctx, in.LogStartOffset, in.LogEndOffset); err != nil {
		return nil, m.settle(sp, err)
	}
	locked, err := sp.TryFetchLock()
	if !locked {
		return nil, m.settle(sp, err)
	}
	defer sp.ReleaseFetchLock()
	records, err := sp.Acquire(member, in.LogEndOffset, in.MaxRecords)
	return records, m.settle(sp, err)
}

// Acknowledge acknowledges member's records on each partition of the request. A partition with no
// loaded share-partition answers UNKNOWN_TOPIC_OR_PARTITION: its records were acquired from one that
// is gone.
func (m *Manager) Acknowledge(ctx context.Context, member string, req sharestate.Request[AcknowledgePartition]) sharestate.Response[sharestate.PartitionResult] {
	return fanout.Partitions(ctx, req, func(ctx context.Context, topic sharestate.TopicID, in AcknowledgePartition) sharestate.PartitionResult {
		key := SharePartitionKey{GroupID: req.GroupID, TopicID: topic, Partition: in.Partition}
		sp, err := m.partition(key, false)
		if err == nil {
			err = m.settle(sp, sp.Acknowledge(ctx, member, in.Batches))
		}
		return resultOf(key.Partition, err)
	})
}

// Release releases every record member holds on each partition of the request (its share session
// ended).
func (m *Manager) Release(ctx context.Context, member string, req sharestate.Request[ReleasePartition]) sharestate.Response[sharestate.PartitionResult] {
	return fanout.Partitions(ctx, req, func(ctx context.Context, topic sharestate.TopicID, in ReleasePartition) sharestate.PartitionResult {
		key := SharePartitionKey{GroupID: req.GroupID, TopicID: topic, Partition: in.Partition}
		sp, err := m.partition(key, false)
		if err == nil {
			err = m.settle(sp, sp.Release(ctx, member))
		}
		return resultOf(key.Partition, err)
	})
}

// ExpireLocks takes back, on every share-partition, the records whose acquisition lock has ended
// (SharePartition.ExpireLocks). It returns how many records it took back.
func (m *Manager) ExpireLocks(ctx context.Context) int64 {
	now := m.opts.Partition.Now()
	var total atomic.Int64
	fanout.Each(m.cached(), func(sp *SharePartition) {
		total.Add(sp.ExpireLocks(ctx, now))
		m.dropIfDead(sp)
	})
	return total.Load()
}

// Run expires acquisition locks every ExpiryInterval until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.opts.ExpiryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.ExpireLocks(ctx)
		}
	}
}

// SharePartition returns the cached share-partition of key, or nil.
func (m *Manager) SharePartition(key SharePartitionKey) *SharePartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.partitions[key]
}

// Remove fences and forgets the share-partition of key: the broker no longer leads its partition.
func (m *Manager) Remove(key SharePartitionKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sp := m.partitions[key]; sp != nil {
		sp.MarkFenced()
		delete(m.partitions, key)
	}
}

// cached returns the cached share-partitions.
func (m *Manager) cached() []*SharePartition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*SharePartition, 0, len(m.partitions))
	for _, sp := range m.partitions {
		out = append(out, sp)
	}
	return out
}

// partition returns the share-partition of key. A cached one that is dead (FENCED or FAILED), or
// whose leader epoch is no longer the partition's, is replaced (create) or forgotten. The broker
// must lead the partition.
func (m *Manager) partition(key SharePartitionKey, create bool) (*SharePartition, error) {
	if o := sharestate.CheckGroupID(key.GroupID); !o.OK() {
		return nil, &PartitionError{Code: o.Code, Message: o.Message}
	}
	if o := sharestate.CheckKeyInput(key.TopicID, key.Partition); !o.OK() {
		return nil, &PartitionError{Code: o.Code, Message: o.Message}
	}
	epoch, leader := m.opts.LeaderEpoch(key.TopicID, key.Partition)
	m.mu.Lock()
	defer m.mu.Unlock()
	sp := m.partitions[key]
	if sp != nil && (!leader || sp.LeaderEpoch() != epoch || dead(sp.State())) {
		sp.MarkFenced()
		delete(m.partitions, key)
		sp = nil
	}
	switch {
	case !leader:
		return nil, partitionErr(sharestate.ErrNotLeaderOrFollower, "this broker does not lead partition %s", key)
	case sp != nil:
		return sp, nil
	case !create:
		return nil, partitionErr(sharestate.ErrUnknownTopicOrPartition, "share-partition %s is not loaded on this broker", key)
	}
	sp, err := NewSharePartition(key, epoch, m.opts.Store, m.opts.Partition)
	if err != nil {
		return nil, partitionErr(sharestate.ErrUnknownServerError, "share-partition %s: %v", key, err)
	}
	m.partitions[key] = sp
	return sp, nil
}

// settle forgets sp when err left it dead, and returns err.
func (m *Manager) settle(sp *SharePartition, err error) error {
	if err != nil {
		m.dropIfDead(sp)
	}
	return err
}

// dropIfDead forgets sp when it is FENCED or FAILED, unless a new share-partition replaced it.
func (m *Manager) dropIfDead(sp *SharePartition) {
	state := sp.State()
	if !dead(state) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.partitions[sp.key] == sp {
		delete(m.partitions, sp.key)
		m.log.V(4).Info("Dropped share-partition", "group", sp.key.GroupID, "topicId", sp.key.TopicID.String(),
			"partition", sp.key.Partition, "state", state.String())
	}
}

func dead(s PartitionState) bool { return s == PartitionFenced || s == PartitionFailed }

// resultOf is a partition's result for err.
func resultOf(partition int32, err error) sharestate.PartitionResult {
	if err == nil {
		return sharestate.PartitionResult{Partition: partition}
	}
	var perr *PartitionError
	if errors.As(err, &perr) {
		return sharestate.PartitionResult{Partition: partition, ErrorCode: perr.Code, ErrorMessage: perr.Error()}
	}
	return sharestate.PartitionResult{Partition: partition, ErrorCode: sharestate.ErrUnknownServerError, ErrorMessage: err.Error()}
}
