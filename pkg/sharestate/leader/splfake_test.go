package leader

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// fakeStore is an in-memory persister for the share-partition leader's unit tests. It answers with
// the sequential rules of rules.go (so fencing is exactly semantics §4–§5), records every call, and can
// be told to answer a partition's next calls with given codes, or to run a hook before a call.
type fakeStore struct {
	mu      sync.Mutex
	states  map[SharePartitionKey]*sharestate.State
	unknown map[SharePartitionKey]bool
	calls   []fakeCall
	forced  map[fakeOp][]sharestate.ErrorCode
	hooks   map[fakeOp]func()

	writesInFlight, maxWritesInFlight int
}

// fakeOp is an operation on one share-partition.
type fakeOp struct {
	op  string
	key SharePartitionKey
}

// fakeCall is one partition's call and its answer.
type fakeCall struct {
	op          string
	key         SharePartitionKey
	leaderEpoch int32
	write       sharestate.WritePartition
	code        sharestate.ErrorCode
}

func newFakeStore() *fakeStore {
	return &fakeStore{states: map[SharePartitionKey]*sharestate.State{}, unknown: map[SharePartitionKey]bool{},
		forced: map[fakeOp][]sharestate.ErrorCode{}, hooks: map[fakeOp]func(){}}
}

var _ sharestate.Store = (*fakeStore)(nil)

// each answers every partition of req with fn, in order.
func each[P, R any](req sharestate.Request[P], fn func(SharePartitionKey, P) R, partition func(P) int32) sharestate.Response[R] {
	resp := sharestate.Response[R]{}
	for _, t := range req.Topics {
		out := sharestate.TopicData[R]{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			out.Partitions = append(out.Partitions, fn(SharePartitionKey{GroupID: req.GroupID, TopicID: t.TopicID, Partition: partition(p)}, p))
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

// before runs the hook of op on key, without the lock, then takes the lock; it returns a forced
// answer if one is queued.
func (s *fakeStore) before(op string, key SharePartitionKey) (forced sharestate.ErrorCode, ok bool) {
	s.mu.Lock()
	hook := s.hooks[fakeOp{op, key}]
	s.mu.Unlock()
	if hook != nil {
		hook()
	}
	s.mu.Lock()
	q := s.forced[fakeOp{op, key}]
	if len(q) == 0 {
		return 0, false
	}
	s.forced[fakeOp{op, key}] = q[1:]
	return q[0], true
}

func (s *fakeStore) record(c fakeCall) { s.calls = append(s.calls, c) }

func (s *fakeStore) Initialize(_ context.Context, req sharestate.InitializeRequest) sharestate.InitializeResponse {
	return each(req, func(key SharePartitionKey, p sharestate.InitializePartition) sharestate.PartitionResult {
		_, _ = s.before("initialize", key)
		defer s.mu.Unlock()
		o := sharestate.CheckInitializeInput(key.TopicID, p)
		if o.OK() {
			var next sharestate.State
			if next, o = sharestate.ApplyInitialize(s.states[key], p, !s.unknown[key]); o.OK() {
				s.states[key] = &next
			}
		}
		s.record(fakeCall{op: "initialize", key: key, code: o.Code})
		return sharestate.PartitionResult{Partition: p.Partition, ErrorCode: o.Code, ErrorMessage: o.Message}
	}, func(p sharestate.InitializePartition) int32 { return p.Partition })
}

func (s *fakeStore) Read(_ context.Context, req sharestate.ReadRequest) sharestate.ReadResponse {
	return each(req, func(key SharePartitionKey, p sharestate.ReadPartition) sharestate.ReadResult {
		code, forced := s.before("read", key)
		defer s.mu.Unlock()
		res := sharestate.ReadResult{PartitionResult: sharestate.PartitionResult{Partition: p.Partition}}
		o := sharestate.Outcome{Code: code, Message: "forced"}
		if !forced {
			o = s.applyRead(key, p, &res)
		}
		res.ErrorCode, res.ErrorMessage = o.Code, o.Message
		s.record(fakeCall{op: "read", key: key, leaderEpoch: p.LeaderEpoch, code: o.Code})
		return res
	}, func(p sharestate.ReadPartition) int32 { return p.Partition })
}

func (s *fakeStore) applyRead(key SharePartitionKey, p sharestate.ReadPartition, res *sharestate.ReadResult) sharestate.Outcome {
	if o := sharestate.CheckReadInput(key.TopicID, p); !o.OK() {
		return o
	}
	next, _, o := sharestate.ApplyRead(s.states[key], p, !s.unknown[key])
	if !o.OK() {
		return o
	}
	s.states[key] = &next
	res.StateEpoch, res.StartOffset, res.StateBatches = next.StateEpoch, next.StartOffset, slices.Clone(next.Batches)
	return o
}

func (s *fakeStore) Write(_ context.Context, req sharestate.WriteRequest) sharestate.WriteResponse {
	return each(req, func(key SharePartitionKey, p sharestate.WritePartition) sharestate.PartitionResult {
		s.mu.Lock()
		s.writesInFlight++
		s.maxWritesInFlight = max(s.maxWritesInFlight, s.writesInFlight)
		s.mu.Unlock()
		code, forced := s.before("write", key)
		defer s.mu.Unlock()
		s.writesInFlight--
		o := sharestate.Outcome{Code: code, Message: "forced"}
		if !forced {
			o = s.applyWrite(key, p)
		}
		p.StateBatches = slices.Clone(p.StateBatches)
		s.record(fakeCall{op: "write", key: key, leaderEpoch: p.LeaderEpoch, write: p, code: o.Code})
		return sharestate.PartitionResult{Partition: p.Partition, ErrorCode: o.Code, ErrorMessage: o.Message}
	}, func(p sharestate.WritePartition) int32 { return p.Partition })
}

func (s *fakeStore) applyWrite(key SharePartitionKey, p sharestate.WritePartition) sharestate.Outcome {
	if o := sharestate.CheckWriteInput(key.TopicID, p, sharestate.DefaultLimits); !o.OK() {
		return o
	}
	next, o := sharestate.ApplyWrite(s.states[key], p, !s.unknown[key], sharestate.DefaultLimits)
	if o.OK() {
		s.states[key] = &next
	}
	return o
}

func (s *fakeStore) Delete(_ context.Context, req sharestate.DeleteRequest) sharestate.DeleteResponse {
	return each(req, func(key SharePartitionKey, p sharestate.DeletePartition) sharestate.PartitionResult {
		_, _ = s.before("delete", key)
		defer s.mu.Unlock()
		delete(s.states, key)
		s.record(fakeCall{op: "delete", key: key})
		return sharestate.PartitionResult{Partition: p.Partition}
	}, func(p sharestate.DeletePartition) int32 { return p.Partition })
}

func (s *fakeStore) ReadSummary(_ context.Context, req sharestate.ReadSummaryRequest) sharestate.ReadSummaryResponse {
	return each(req, func(key SharePartitionKey, p sharestate.ReadSummaryPartition) sharestate.ReadSummaryResult {
		_, _ = s.before("read_summary", key)
		defer s.mu.Unlock()
		res := sharestate.SummaryOf(s.states[key])
		res.Partition = p.Partition
		s.record(fakeCall{op: "read_summary", key: key})
		return res
	}, func(p sharestate.ReadSummaryPartition) int32 { return p.Partition })
}

// The test's controls.

// setup initializes key's state through the store's own rules.
func (s *fakeStore) setup(t *testing.T, key SharePartitionKey, stateEpoch int32, start int64) {
	t.Helper()
	resp := s.Initialize(context.Background(), sharestate.InitializeRequest{GroupID: key.GroupID, Topics: []sharestate.TopicData[sharestate.InitializePartition]{{
		TopicID: key.TopicID, Partitions: []sharestate.InitializePartition{{Partition: key.Partition, StateEpoch: stateEpoch, StartOffset: start}},
	}}})
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != sharestate.ErrNone {
		t.Fatalf("initialize %s: %s", key, c)
	}
}

// plant stores st as key's state, bypassing the rules (a corrupt or hand-made state).
func (s *fakeStore) plant(key SharePartitionKey, st sharestate.State) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[key] = &st
}

// fenceStateEpoch raises key's state epoch, as the operator's fence does.
func (s *fakeStore) fenceStateEpoch(key SharePartitionKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[key].StateEpoch++
}

// fenceLeaderEpoch raises key's leader epoch to epoch, as a new leader's Read does.
func (s *fakeStore) fenceLeaderEpoch(key SharePartitionKey, epoch int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.states[key].LeaderEpoch = epoch
}

// force makes the next calls of op on key answer codes, one each, without any effect.
func (s *fakeStore) force(op string, key SharePartitionKey, codes ...sharestate.ErrorCode) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forced[fakeOp{op, key}] = append(s.forced[fakeOp{op, key}], codes...)
}

// hook runs fn at the start of every call of op on key.
func (s *fakeStore) hook(op string, key SharePartitionKey, fn func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks[fakeOp{op, key}] = fn
}

// state returns a copy of key's stored state.
func (s *fakeStore) state(t *testing.T, key SharePartitionKey) sharestate.State {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.states[key]
	if st == nil {
		t.Fatalf("no state for %s", key)
	}
	c := *st
	c.Batches = slices.Clone(st.Batches)
	return c
}

// callsOf returns the calls of op on key, in order.
func (s *fakeStore) callsOf(op string, key SharePartitionKey) []fakeCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []fakeCall
	for _, c := range s.calls {
		if c.op == op && c.key == key {
			out = append(out, c)
		}
	}
	return out
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func sb(first, last int64, state sharestate.DeliveryState, count int16) sharestate.StateBatch {
	return sharestate.StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: count}
}

// Short names of the delivery states for the tables.
const (
	avail = sharestate.DeliveryStateAvailable
	acked = sharestate.DeliveryStateAcknowledged
	archd = sharestate.DeliveryStateArchived
)
