//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/leader"
)

// leadership is the Kafka controller's view: which broker leads each partition, at which epoch.
type leadership struct {
	mu     sync.Mutex
	leader map[int32]int32
	epoch  map[int32]int32
	paused map[int32]bool // partitions whose consumers wait (while their leader is being fenced)
}

func newLeadership(partitions, brokers int32) *leadership {
	l := &leadership{leader: map[int32]int32{}, epoch: map[int32]int32{}, paused: map[int32]bool{}}
	for p := range partitions {
		l.leader[p], l.epoch[p] = p%brokers, 1
	}
	return l
}

// epochFor is a broker's ManagerOptions.LeaderEpoch.
func (l *leadership) epochFor(broker int32) func(sharestate.TopicID, int32) (int32, bool) {
	return func(_ sharestate.TopicID, p int32) (int32, bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.epoch[p], l.leader[p] == broker
	}
}

func (l *leadership) leaderOf(p int32) (broker int32, paused bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leader[p], l.paused[p]
}

// ledBy returns the partitions broker leads.
func (l *leadership) ledBy(broker int32) []int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []int32
	for p, b := range l.leader {
		if b == broker {
			out = append(out, p)
		}
	}
	return out
}

func (l *leadership) pause(partitions []int32, paused bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range partitions {
		l.paused[p] = paused
	}
}

// move gives partitions to other brokers at a higher leader epoch (a new leader election).
func (l *leadership) move(partitions []int32, to func(int32) int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range partitions {
		l.leader[p] = to(p)
		l.epoch[p]++
	}
}

// ledger is what the simulated consumers saw and decided, per partition and offset, and the
// invariants it checks as they go (semantics §10.4, §10.5).
type ledger struct {
	mu          sync.Mutex
	deliveries  map[key][]int16 // delivery counts seen, in order
	attempted   map[key]map[leader.AckType]bool
	final       map[key]leader.AckType // ACCEPT, REJECT or (at the limit) RELEASE, answered NONE
	acceptedAt  map[key]int16          // the delivery count of a confirmed acceptance
	violations  []string
	redelivered int  // deliveries after the first one
	checking    bool // phase 1: the invariants hold; off once a reset starts (a reset redelivers by design)
}

type key struct {
	partition int32
	offset    int64
}

func newLedger() *ledger {
	return &ledger{deliveries: map[key][]int16{}, attempted: map[key]map[leader.AckType]bool{},
		final: map[key]leader.AckType{}, acceptedAt: map[key]int16{}, checking: true}
}

func (g *ledger) violate(format string, args ...any) {
	g.violations = append(g.violations, fmt.Sprintf(format, args...))
}

// delivered records an acquisition: an offset whose acceptance was confirmed is never delivered
// again, and delivery counts never go down.
func (g *ledger) delivered(p int32, recs []leader.AcquiredRecords) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, r := range recs {
		for o := r.FirstOffset; o <= r.LastOffset; o++ {
			k := key{p, o}
			seen := g.deliveries[k]
			if len(seen) > 0 {
				g.redelivered++
			}
			if g.checking {
				if t, ok := g.final[k]; ok && t == leader.AckAccept {
					g.violate("partition %d offset %d delivered again after its acceptance was acknowledged", p, o)
				}
				// An acquisition is not persisted (only state changes are, semantics §8), so a record in
				// flight on a leader that died is delivered again by the next one with the same count;
				// it never goes down.
				if len(seen) > 0 && r.DeliveryCount < seen[len(seen)-1] {
					g.violate("partition %d offset %d: delivery count %d after %d", p, o, r.DeliveryCount, seen[len(seen)-1])
				}
			}
			g.deliveries[k] = append(seen, r.DeliveryCount)
		}
	}
}

func (g *ledger) attempt(p int32, offset int64, t leader.AckType) {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := key{p, offset}
	if g.attempted[k] == nil {
		g.attempted[k] = map[leader.AckType]bool{}
	}
	g.attempted[k][t] = true
}

func (g *ledger) confirm(p int32, offset int64, t leader.AckType, count int16, limit int16) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t != leader.AckRelease || count >= limit {
		g.final[key{p, offset}] = t
	}
	if t == leader.AckAccept {
		g.acceptedAt[key{p, offset}] = count
	}
}

// done reports whether every offset of [from, to) of the partition has a final decision.
func (g *ledger) done(p int32, from, to int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for o := from; o < to; o++ {
		if _, ok := g.final[key{p, o}]; !ok {
			return false
		}
	}
	return true
}

// checkStored checks one stored version of a partition's batches against what the consumers decided:
// ACKNOWLEDGED only where an acceptance was sent, ARCHIVED only where a rejection or a release was,
// and never AVAILABLE where an acceptance was confirmed.
func (g *ledger) checkStored(p int32, batches []sharestate.StateBatch) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.checking {
		return
	}
	for _, b := range batches {
		for o := b.FirstOffset; o <= b.LastOffset; o++ {
			k := key{p, o}
			sent := g.attempted[k]
			switch b.DeliveryState {
			case sharestate.DeliveryStateAcknowledged:
				if !sent[leader.AckAccept] {
					g.violate("partition %d offset %d stored ACKNOWLEDGED, but no consumer accepted it", p, o)
				}
			case sharestate.DeliveryStateArchived:
				if !sent[leader.AckReject] && !sent[leader.AckRelease] {
					g.violate("partition %d offset %d stored ARCHIVED, but no consumer rejected or released it", p, o)
				}
			case sharestate.DeliveryStateAvailable:
				// The watch may bring an older version late: only a version at or past the accepted
				// delivery (its count) that says AVAILABLE contradicts the acknowledged acceptance.
				if c, ok := g.acceptedAt[k]; ok && b.DeliveryCount >= c {
					g.violate("partition %d offset %d stored AVAILABLE at delivery %d after its acceptance at delivery %d was acknowledged", p, o, b.DeliveryCount, c)
				}
			}
		}
	}
}

// consumer is a simulated share consumer of one partition: it fetches from whichever broker leads
// the partition, decides each record (mostly accept, sometimes release or reject) and acknowledges.
type consumer struct {
	partition int32
	topic     sharestate.TopicID
	group     string
	leaders   *leadership
	managers  map[int32]*leader.Manager
	ledger    *ledger
	rng       *rand.Rand
	limit     int16
	errors    int
}

// run consumes until stop says so; logEnd gives the log's current end offset.
func (c *consumer) run(ctx context.Context, logEnd func() int64, stop func() bool) {
	member := fmt.Sprintf("consumer-%d", c.partition)
	for !stop() && ctx.Err() == nil {
		b, paused := c.leaders.leaderOf(c.partition)
		if paused {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		m := c.managers[b]
		fetch := m.Fetch(ctx, member, sharestate.Request[leader.FetchPartition]{GroupID: c.group,
			Topics: []sharestate.TopicData[leader.FetchPartition]{{TopicID: c.topic, Partitions: []leader.FetchPartition{
				{Partition: c.partition, LogStartOffset: 0, LogEndOffset: logEnd(), MaxRecords: 10}}}}})
		res := fetch.Topics[0].Partitions[0]
		if res.ErrorCode != sharestate.ErrNone || len(res.Records) == 0 {
			if res.ErrorCode != sharestate.ErrNone {
				c.errors++
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		c.ledger.delivered(c.partition, res.Records)
		c.acknowledge(ctx, m, member, res.Records)
	}
}

func (c *consumer) acknowledge(ctx context.Context, m *leader.Manager, member string, recs []leader.AcquiredRecords) {
	type decision struct {
		offset int64
		t      leader.AckType
		count  int16
	}
	var decisions []decision
	var batches []leader.AckBatch
	for _, r := range recs {
		for o := r.FirstOffset; o <= r.LastOffset; o++ {
			t := leader.AckAccept
			switch c.rng.IntN(10) {
			case 0:
				t = leader.AckReject
			case 1:
				t = leader.AckRelease
			}
			c.ledger.attempt(c.partition, o, t)
			decisions = append(decisions, decision{o, t, r.DeliveryCount})
			batches = append(batches, leader.AckBatch{FirstOffset: o, LastOffset: o, Type: t})
		}
	}
	ack := m.Acknowledge(ctx, member, sharestate.Request[leader.AcknowledgePartition]{GroupID: c.group,
		Topics: []sharestate.TopicData[leader.AcknowledgePartition]{{TopicID: c.topic, Partitions: []leader.AcknowledgePartition{
			{Partition: c.partition, Batches: batches}}}}})
	if ack.Topics[0].Partitions[0].ErrorCode != sharestate.ErrNone {
		c.errors++
		return
	}
	for _, d := range decisions {
		c.ledger.confirm(c.partition, d.offset, d.t, d.count, c.limit)
	}
}

// runConsumers runs one consumer per partition until stop; it returns the errors they met.
func runConsumers(ctx context.Context, t *testing.T, consumers []*consumer, logEnd func() int64, stop func(p int32) bool) int {
	t.Helper()
	var wg sync.WaitGroup
	for _, c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.run(ctx, logEnd, func() bool { return stop(c.partition) })
		}()
	}
	wg.Wait()
	errors := 0
	for _, c := range consumers {
		errors += c.errors
		c.errors = 0
	}
	return errors
}
