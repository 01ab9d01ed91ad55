package persister_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// --- The run: brokers and a fencing actor issue operations; a recorder keeps the history. ---

// recorder keeps the history, one operation per partition of each request.
type recorder struct {
	base time.Time
	mu   sync.Mutex
	ops  []porcupine.Operation
}

// now is the time since the run began, on the monotonic clock.
func (r *recorder) now() int64 { return time.Since(r.base).Nanoseconds() }

func (r *recorder) add(clientID int, call, ret int64, ins []linInput, outs []linOutput) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range ins {
		r.ops = append(r.ops, porcupine.Operation{ClientId: clientID, Input: ins[i], Call: call, Output: outs[i], Return: ret})
	}
}

// operations returns the operations as they were called and answered.
func (r *recorder) operations() []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ops)
}

// linHistory is the history to check. An ambiguous operation may take effect at any time after its
// call up to grace after its answer (untilEnd: the end of the history), or never; ReadSummary never
// writes, so an ambiguous one is left out.
func linHistory(ops []porcupine.Operation, grace time.Duration) []porcupine.Operation {
	end := int64(0)
	for _, op := range ops {
		end = max(end, op.Return)
	}
	h := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		if op.Output.(linOutput).ambiguous() {
			if op.Input.(linInput).kind == opReadSummary {
				continue
			}
			if grace >= time.Duration(end) {
				op.Return = end + 1
			} else {
				op.Return = min(end+1, op.Return+int64(grace))
			}
		}
		h = append(h, op)
	}
	return h
}

// linEpochs are the highest epochs handed out per partition, shared by every caller so that their
// guesses stay near the stored ones.
type linEpochs struct {
	leader, state [linPartitions]atomic.Int32
}

// linView is what a broker believes of one partition: the epochs it holds, the start offset it last
// read, and the operation it owes after an answer (opNone: none).
type linView struct {
	leaderEpoch, stateEpoch int32
	startOffset             int64
	owed                    opKind
}

type linBroker struct {
	persister *persister.Persister
	mu        sync.Mutex
	views     [linPartitions]linView
}

// learn updates the broker's beliefs from the answers, the way a share-partition leader does.
func (b *linBroker) learn(epochs *linEpochs, ins []linInput, outs []linOutput) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, in := range ins {
		p := in.partition()
		v := &b.views[p]
		switch out := outs[i]; {
		case out.code == sharestate.ErrNone && in.kind == opRead:
			v.stateEpoch, v.startOffset = out.read.StateEpoch, out.read.StartOffset
		case out.code == sharestate.ErrFencedLeaderEpoch:
			// Another leader took over: follow it at its epoch.
			v.leaderEpoch, v.owed = epochs.leader[p].Load(), opRead
		case out.code == sharestate.ErrFencedStateEpoch:
			v.owed = opRead
		case out.code == sharestate.ErrInvalidRequest && (in.kind == opRead || in.kind == opWrite):
			v.owed = opInitialize // uninitialized (or an invalid input, which an Initialize does not hurt)
		}
	}
}

type linWorker struct {
	id     int
	broker *linBroker
	epochs *linEpochs
	rng    *rand.Rand
}

// nextRequest draws the next request: a reaction owed on a partition first, alone; otherwise a random
// operation on one partition or on both.
func (w *linWorker) nextRequest() []linInput {
	b := w.broker
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range w.rng.Perm(linPartitions) {
		if kind := b.views[p].owed; kind != opNone {
			b.views[p].owed = opNone
			return []linInput{w.input(kind, int32(p))}
		}
	}
	var kind opKind
	switch r := w.rng.IntN(100); {
	case r < 52:
		kind = opWrite
	case r < 74:
		kind = opRead
	case r < 86:
		kind = opReadSummary
	case r < 99:
		kind = opInitialize
	default:
		kind = opDelete
	}
	parts := w.rng.Perm(linPartitions)
	if w.rng.IntN(4) != 0 {
		parts = parts[:1]
	}
	ins := make([]linInput, len(parts))
	for i, p := range parts {
		ins[i] = w.input(kind, int32(p))
	}
	return ins
}

// input draws one partition's input, mostly from the broker's beliefs so that many operations pass the
// epoch checks, sometimes stale or ahead. The broker's lock is held.
func (w *linWorker) input(kind opKind, p int32) linInput {
	v, rng := &w.broker.views[p], w.rng
	switch kind {
	case opInitialize:
		epoch := max(v.stateEpoch, w.epochs.state[p].Load())
		if rng.IntN(20) == 0 {
			epoch = w.epochs.state[p].Add(1)
		}
		return linInput{kind: kind, init: sharestate.InitializePartition{Partition: p, StateEpoch: epoch, StartOffset: randomStart(rng, v.startOffset)}}
	case opRead:
		if rng.IntN(7) == 0 {
			v.leaderEpoch = w.epochs.leader[p].Add(1) // take the partition over
		}
		return linInput{kind: kind, read: sharestate.ReadPartition{Partition: p, LeaderEpoch: nudge(rng, v.leaderEpoch, 10, 0)}}
	case opWrite:
		return linInput{kind: kind, write: randomWrite(rng, p, v)}
	case opDelete:
		return linInput{kind: kind, del: sharestate.DeletePartition{Partition: p}}
	default:
		return linInput{kind: opReadSummary, summary: sharestate.ReadSummaryPartition{Partition: p, LeaderEpoch: v.leaderEpoch}}
	}
}

// nudge returns epoch, one below it once in lower draws, or one above it once in upper draws (never
// below 0).
func nudge(rng *rand.Rand, epoch int32, lower, upper int) int32 {
	switch {
	case rng.IntN(lower) == 0:
		return max(epoch-1, 0)
	case upper > 0 && rng.IntN(upper) == 0:
		return epoch + 1
	}
	return epoch
}

// randomStart is a start offset near the one last read, or -1.
func randomStart(rng *rand.Rand, known int64) int64 {
	if rng.IntN(3) == 0 {
		return -1
	}
	return max(known, 0) + rng.Int64N(4)
}

func randomWrite(rng *rand.Rand, p int32, v *linView) sharestate.WritePartition {
	w := sharestate.WritePartition{
		Partition: p, StateEpoch: nudge(rng, v.stateEpoch, 14, 12), LeaderEpoch: nudge(rng, v.leaderEpoch, 12, 0),
		StartOffset: -1, DeliveryCompleteCount: -1,
	}
	if rng.IntN(10) < 3 {
		w.StartOffset = randomStart(rng, v.startOffset)
	}
	if rng.IntN(2) == 0 {
		w.DeliveryCompleteCount = rng.Int32N(30)
	}
	base := max(v.startOffset, 0)
	for range rng.IntN(5) {
		first := base + rng.Int64N(51)
		w.StateBatches = append(w.StateBatches, sharestate.StateBatch{
			FirstOffset: first, LastOffset: first + rng.Int64N(8),
			DeliveryState: []sharestate.DeliveryState{0, 2, 4}[rng.IntN(3)], DeliveryCount: int16(rng.IntN(6)),
		})
	}
	if rng.IntN(50) == 0 { // an invalid input now and then
		if len(w.StateBatches) > 0 {
			w.StateBatches[0].LastOffset = w.StateBatches[0].FirstOffset - 1
		} else {
			w.LeaderEpoch = -1
		}
	}
	return w
}

func (w *linWorker) run(ctx context.Context, rec *recorder, budget *atomic.Int64, t *testing.T) {
	for ctx.Err() == nil && budget.Add(-1) >= 0 {
		ins := w.nextRequest()
		call := rec.now()
		outs, err := issue(ctx, w.broker.persister, ins)
		ret := rec.now()
		if err != nil {
			t.Error(err)
			return
		}
		rec.add(w.id, call, ret, ins, outs)
		w.broker.learn(w.epochs, ins, outs)
	}
}

// fence is the fencing actor: the operator's state-epoch bumps, new leaders' first Reads, admin
// deletes, every few tens of milliseconds until ctx ends.
func fence(ctx context.Context, p *persister.Persister, epochs *linEpochs, rec *recorder, rng *rand.Rand, t *testing.T) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(30+rng.IntN(120)) * time.Millisecond):
		}
		part := int32(rng.IntN(linPartitions))
		var in linInput
		switch r := rng.IntN(100); {
		case r < 40:
			in = linInput{kind: opInitialize, init: sharestate.InitializePartition{
				Partition: part, StateEpoch: epochs.state[part].Add(1), StartOffset: rng.Int64N(22) - 1,
			}}
		case r < 75:
			in = linInput{kind: opRead, read: sharestate.ReadPartition{Partition: part, LeaderEpoch: epochs.leader[part].Add(1)}}
		case r < 85:
			in = linInput{kind: opDelete, del: sharestate.DeletePartition{Partition: part}}
		default:
			in = linInput{kind: opReadSummary, summary: sharestate.ReadSummaryPartition{Partition: part}}
		}
		call := rec.now()
		outs, err := issue(context.WithoutCancel(ctx), p, []linInput{in})
		if err != nil {
			t.Error(err)
			return
		}
		rec.add(linFencerClientID, call, rec.now(), []linInput{in}, outs)
	}
}

// runLinearizability runs the brokers (through brokerHost when set, else straight to the API server)
// and the fencing actor (always straight) until they issued linRequests requests, then reads every
// partition once more after quiescence, and returns the history.
func runLinearizability(t *testing.T, brokerHost string, seed uint64) []porcupine.Operation {
	t.Logf("seed %d", seed)
	ns := env.Namespace(t)
	rec := &recorder{base: time.Now()}
	epochs := &linEpochs{}
	ctx, cancel := context.WithTimeout(t.Context(), linMaxRunTime)
	defer cancel()

	var budget atomic.Int64
	budget.Store(linRequests)
	var workers sync.WaitGroup
	for b := range linBrokers {
		broker := &linBroker{persister: newLinPersister(t, ns, brokerHost, int32(b+1))}
		for p := range broker.views {
			broker.views[p].owed = opInitialize
			broker.views[p].startOffset = -1
		}
		for i := range linWorkers {
			id := b*linWorkers + i
			w := &linWorker{id: id, broker: broker, epochs: epochs, rng: rand.New(rand.NewPCG(seed, uint64(id)))}
			workers.Go(func() { w.run(ctx, rec, &budget, t) })
		}
	}
	fencer := newLinPersister(t, ns, "", linBrokers+1)
	fenceCtx, stopFencing := context.WithCancel(ctx)
	var fencing sync.WaitGroup
	fencing.Go(func() { fence(fenceCtx, fencer, epochs, rec, rand.New(rand.NewPCG(seed, 1<<32)), t) })
	started := time.Now()
	workers.Wait()
	stopFencing()
	fencing.Wait()
	t.Logf("%d requests in %v", linRequests-max(budget.Load(), 0), time.Since(started).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("the run did not finish within %v", linMaxRunTime)
	}

	// After quiescence, a last look at every partition: no write answered NONE may be missing from it.
	for p := range int32(linPartitions) {
		for _, in := range []linInput{
			{kind: opRead, read: sharestate.ReadPartition{Partition: p, LeaderEpoch: epochs.leader[p].Load()}},
			{kind: opReadSummary, summary: sharestate.ReadSummaryPartition{Partition: p}},
		} {
			call := rec.now()
			outs, err := issue(t.Context(), fencer, []linInput{in})
			if err != nil {
				t.Fatal(err)
			}
			if outs[0].ambiguous() {
				t.Errorf("the last look at partition %d: %s", p, describeOperation(in, outs[0]))
			}
			rec.add(linFencerClientID, call, rec.now(), []linInput{in}, outs)
		}
	}
	ops := rec.operations()
	checkWorkload(t, ops, brokerHost == "")
	return ops
}

// newLinPersister returns a persister with a client and a connection of its own. host, when set,
// replaces the API server's address.
func newLinPersister(t *testing.T, ns, host string, brokerID int32) *persister.Persister {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	if host != "" {
		cfg.Host = host
	}
	cfg.QPS, cfg.Burst = -1, -1
	// A dial function of its own keeps client-go from sharing one cached transport, and so one
	// connection, among all persisters.
	cfg.Dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatalf("creating an HTTP client: %v", err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme, HTTPClient: hc})
	if err != nil {
		t.Fatalf("creating a client: %v", err)
	}
	p, err := persister.New(persister.Options{
		Client: c, Namespace: ns,
		Identity:         persister.Identity{BrokerID: brokerID, PodName: fmt.Sprintf("broker-%d", brokerID), PodUID: fmt.Sprintf("uid-%d", brokerID)},
		OperationTimeout: 5 * time.Second, RequestTimeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatalf("creating a persister: %v", err)
	}
	return p
}

// issue sends one request of ins' kind (all the same) and returns each partition's answer.
func issue(ctx context.Context, p *persister.Persister, ins []linInput) ([]linOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch ins[0].kind {
	case opInitialize:
		resp := p.Initialize(ctx, linRequest(ins, func(in linInput) sharestate.InitializePartition { return in.init }))
		return linOutputs(resp, ins, plainOutput)
	case opRead:
		resp := p.Read(ctx, linRequest(ins, func(in linInput) sharestate.ReadPartition { return in.read }))
		return linOutputs(resp, ins, func(r sharestate.ReadResult) (int32, linOutput) {
			return r.Partition, linOutput{code: r.ErrorCode, message: r.ErrorMessage, read: r}
		})
	case opWrite:
		resp := p.Write(ctx, linRequest(ins, func(in linInput) sharestate.WritePartition { return in.write }))
		return linOutputs(resp, ins, plainOutput)
	case opDelete:
		resp := p.Delete(ctx, linRequest(ins, func(in linInput) sharestate.DeletePartition { return in.del }))
		return linOutputs(resp, ins, plainOutput)
	default:
		resp := p.ReadSummary(ctx, linRequest(ins, func(in linInput) sharestate.ReadSummaryPartition { return in.summary }))
		return linOutputs(resp, ins, func(r sharestate.ReadSummaryResult) (int32, linOutput) {
			return r.Partition, linOutput{code: r.ErrorCode, message: r.ErrorMessage, summary: r}
		})
	}
}

func plainOutput(r sharestate.PartitionResult) (int32, linOutput) {
	return r.Partition, linOutput{code: r.ErrorCode, message: r.ErrorMessage}
}

func linRequest[P any](ins []linInput, part func(linInput) P) sharestate.Request[P] {
	parts := make([]P, len(ins))
	for i, in := range ins {
		parts[i] = part(in)
	}
	return sharestate.Request[P]{GroupID: linGroup, Topics: []sharestate.TopicData[P]{{TopicID: linTopicID, Partitions: parts}}}
}

// linOutputs checks that resp answers the request's topic and partitions in order, and converts the
// answers.
func linOutputs[R any](resp sharestate.Response[R], ins []linInput, convert func(R) (int32, linOutput)) ([]linOutput, error) {
	if len(resp.Topics) != 1 || resp.Topics[0].TopicID != linTopicID || len(resp.Topics[0].Partitions) != len(ins) {
		return nil, fmt.Errorf("response %+v does not answer topic %s with %d partitions", resp, linTopic, len(ins))
	}
	outs := make([]linOutput, len(ins))
	for i, r := range resp.Topics[0].Partitions {
		p, out := convert(r)
		if p != ins[i].partition() {
			return nil, fmt.Errorf("response %+v answers partition %d where the request had %d", resp, p, ins[i].partition())
		}
		outs[i] = out
	}
	return outs, nil
}

// checkWorkload logs what the run did and fails it if it was too small or too one-sided to test
// anything: a run where no write succeeds, or none is fenced, proves little. In a clean run nothing
// unexpected may happen: the model would take an UNKNOWN_SERVER_ERROR for a maybe, hiding a bug.
