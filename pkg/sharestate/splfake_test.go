package sharestate

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// fakeStore is an in-memory persister for the share-partition leader's unit tests. It answers with
// the sequential rules of rules.go (so fencing is exactly spec §4–§5), records every call, and can
// be told to answer a partition's next calls with given codes, or to run a hook before a call.
type fakeStore struct {
	mu      sync.Mutex
	states  map[SharePartitionKey]*State
	unknown map[SharePartitionKey]bool
	calls   []fakeCall
	forced  map[fakeOp][]ErrorCode
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
	write       WritePartition
	code        ErrorCode
}

func newFakeStore() *fakeStore {
	return &fakeStore{states: map[SharePartitionKey]*State{}, unknown: map[SharePartitionKey]bool{},
		forced: map[fakeOp][]ErrorCode{}, hooks: map[fakeOp]func(){}}
}

var _ Store = (*fakeStore)(nil)

// each answers every partition of req with fn, in order.
func each[P, R any](req Request[P], fn func(SharePartitionKey, P) R, partition func(P) int32) Response[R] {
	resp := Response[R]{}
	for _, t := range req.Topics {
		out := TopicData[R]{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			out.Partitions = append(out.Partitions, fn(SharePartitionKey{GroupID: req.GroupID, TopicID: t.TopicID, Partition: partition(p)}, p))
		}
		resp.Topics = append(resp.Topics, out)
	}
	return resp
}

// before runs the hook of op on key, without the lock, then takes the lock; it returns a forced
// answer if one is queued.
func (s *fakeStore) before(op string, key SharePartitionKey) (forced ErrorCode, ok bool) {
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

func (s *fakeStore) Initialize(_ context.Context, req InitializeRequest) InitializeResponse {
	return each(req, func(key SharePartitionKey, p InitializePartition) PartitionResult {
		_, _ = s.before("initialize", key)
		defer s.mu.Unlock()
		o := CheckInitializeInput(key.TopicID, p)
		if o.OK() {
			var next State
			var reset bool
			next, reset, o = ApplyInitialize(s.states[key], p, !s.unknown[key])
			if o.OK() && reset {
				s.states[key] = &next
			}
		}
		s.record(fakeCall{op: "initialize", key: key, code: o.Code})
		return PartitionResult{Partition: p.Partition, ErrorCode: o.Code, ErrorMessage: o.Message}
	}, func(p InitializePartition) int32 { return p.Partition })
}

func (s *fakeStore) Read(_ context.Context, req ReadRequest) ReadResponse {
	return each(req, func(key SharePartitionKey, p ReadPartition) ReadResult {
		code, forced := s.before("read", key)
		defer s.mu.Unlock()
		res := ReadResult{PartitionResult: PartitionResult{Partition: p.Partition}}
		o := Outcome{Code: code, Message: "forced"}
		if !forced {
			o = s.applyRead(key, p, &res)
		}
		res.ErrorCode, res.ErrorMessage = o.Code, o.Message
		s.record(fakeCall{op: "read", key: key, leaderEpoch: p.LeaderEpoch, code: o.Code})
		return res
	}, func(p ReadPartition) int32 { return p.Partition })
}

func (s *fakeStore) applyRead(key SharePartitionKey, p ReadPartition, res *ReadResult) Outcome {
	if o := CheckReadInput(key.TopicID, p); !o.OK() {
		return o
	}
	next, _, o := ApplyRead(s.states[key], p, !s.unknown[key])
	if !o.OK() {
		return o
	}
	s.states[key] = &next
	res.StateEpoch, res.StartOffset, res.StateBatches = next.StateEpoch, next.StartOffset, slices.Clone(next.Batches)
	return o
}

func (s *fakeStore) Write(_ context.Context, req WriteRequest) WriteResponse {
	return each(req, func(key SharePartitionKey, p WritePartition) PartitionResult {
		s.mu.Lock()
		s.writesInFlight++
		s.maxWritesInFlight = max(s.maxWritesInFlight, s.writesInFlight)
		s.mu.Unlock()
		code, forced := s.before("write", key)
		defer s.mu.Unlock()
		s.writesInFlight--
		o := Outcome{Code: code, Message: "forced"}
		if !forced {
			o = s.applyWrite(key, p)
		}
		p.StateBatches = slices.Clone(p.StateBatches)
		s.record(fakeCall{op: "write", key: key, leaderEpoch: p.LeaderEpoch, write: p, code: o.Code})
		return PartitionResult{Partition: p.Partition, ErrorCode: o.Code, ErrorMessage: o.Message}
	}, func(p WritePartition) int32 { return p.Partition })
}

func (s *fakeStore) applyWrite(key SharePartitionKey, p WritePartition) Outcome {
	if o := CheckWriteInput(key.TopicID, p, DefaultLimits); !o.OK() {
		return o
	}
	next, o := ApplyWrite(s.states[key], p, !s.unknown[key], DefaultLimits)
	if o.OK() {
		s.states[key] = &next
	}
	return o
}

func (s *fakeStore) Delete(_ context.Context, req DeleteRequest) DeleteResponse {
	return each(req, func(key SharePartitionKey, p DeletePartition) PartitionResult {
		_, _ = s.before("delete", key)
		defer s.mu.Unlock()
		delete(s.states, key)
		s.record(fakeCall{op: "delete", key: key})
		return PartitionResult{Partition: p.Partition}
	}, func(p DeletePartition) int32 { return p.Partition })
}

func (s *fakeStore) ReadSummary(_ context.Context, req ReadSummaryRequest) ReadSummaryResponse {
	return each(req, func(key SharePartitionKey, p ReadSummaryPartition) ReadSummaryResult {
		_, _ = s.before("read_summary", key)
		defer s.mu.Unlock()
		res := SummaryOf(s.states[key])
		res.Partition = p.Partition
		s.record(fakeCall{op: "read_summary", key: key})
		return res
	}, func(p ReadSummaryPartition) int32 { return p.Partition })
}

// The test's controls.

// setup initializes key's state through the store's own rules.
func (s *fakeStore) setup(t *testing.T, key SharePartitionKey, stateEpoch int32, start int64) {
	t.Helper()
	resp := s.Initialize(context.Background(), InitializeRequest{GroupID: key.GroupID, Topics: []TopicData[InitializePartition]{{
		TopicID: key.TopicID, Partitions: []InitializePartition{{Partition: key.Partition, StateEpoch: stateEpoch, StartOffset: start}},
	}}})
	if c := resp.Topics[0].Partitions[0].ErrorCode; c != ErrNone {
		t.Fatalf("initialize %s: %s", key, c)
	}
}

// plant stores st as key's state, bypassing the rules (a corrupt or hand-made state).
func (s *fakeStore) plant(key SharePartitionKey, st State) {
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
func (s *fakeStore) force(op string, key SharePartitionKey, codes ...ErrorCode) {
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
func (s *fakeStore) state(t *testing.T, key SharePartitionKey) State {
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
