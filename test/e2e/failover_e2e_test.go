//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/leader"
)

const (
	e2eGroup      = "e2e-orders"
	e2eTopic      = "q1Sh0o2QRbuBzMz8vEMbvQ"
	e2ePartitions = 12
	e2eBrokers    = 3
	deliveryLimit = 5
)

// TestFailoverAndReset is the whole system driven the way users and brokers drive it: kubectl and
// helm install it, three sidecars serve three brokers, simulated consumers acquire and acknowledge
// records through share-partition leaders; a broker's pod is deleted mid-run and its partitions move
// to the other brokers; then an offset reset is made with the kubectl plugin while consumers run.
func TestFailoverAndReset(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	s := startSystem(t)
	s.installWithKubectlAndHelm()
	s.startOperator()
	s.declareGroup(ctx)

	topic, err := sharestate.ParseTopicID(e2eTopic)
	if err != nil {
		t.Fatal(err)
	}
	leaders := newLeadership(e2ePartitions, e2eBrokers)
	brokers, stores, managers := s.startBrokers(ctx, leaders)
	s.initializePartitions(ctx, stores[0], topic)

	ledger := newLedger()
	consumers := make([]*consumer, e2ePartitions)
	for p := range int32(e2ePartitions) {
		consumers[p] = &consumer{partition: p, topic: topic, group: e2eGroup, leaders: leaders, managers: managers,
			ledger: ledger, rng: rand.New(rand.NewPCG(uint64(p), 7)), limit: deliveryLimit}
	}

	// Phase 1: offsets 0..199; broker 1's pod is deleted once consumers are under way.
	var logEnd atomic.Int64
	logEnd.Store(200)
	go s.watchStored(ctx, clientWithWatch(s), ledger)
	failover := make(chan time.Duration, 1)
	go func() { failover <- s.failBroker(ctx, t, brokers[1], stores[1], leaders, ledger, topic) }()
	errs := runConsumers(ctx, t, consumers, logEnd.Load, func(p int32) bool { return ledger.done(p, 0, 200) })
	fenceLatency := <-failover
	s.expectStartOffsets(ctx, stores[0], topic, 200)
	ledger.mu.Lock()
	violations, redelivered := append([]string(nil), ledger.violations...), ledger.redelivered
	ledger.checking = false // a reset redelivers by design: the invariants above are phase 1's
	ledger.mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}

	// Phase 2: offsets up to 399; a reset to 300 through the kubectl plugin while consumers run.
	logEnd.Store(400)
	resetDone := make(chan struct{})
	go func() { s.resetWithPlugin(t, ledger); close(resetDone) }()
	errs += runConsumers(ctx, t, consumers, logEnd.Load, func(int32) bool { return s.allStartAt(ctx, 400) })
	<-resetDone
	s.expectStartOffsets(ctx, stores[0], topic, 400)
	s.expectResetEpoch(ctx)

	t.Logf("fence latency: %v for %d partitions of broker %d; redeliveries: %d (phase 1); errors answered to consumers: %d",
		fenceLatency, e2ePartitions/e2eBrokers, brokers[1].id, redelivered, errs)
	fmt.Printf("e2e: fence_latency_seconds=%.3f redeliveries=%d\n", fenceLatency.Seconds(), redelivered)
}

// declareGroup creates the ShareGroup with kubectl, as a user would.
func (s *system) declareGroup(ctx context.Context) {
	s.t.Helper()
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.brokersNS, Name: "orders"},
		Spec: sharestatev1.ShareGroupSpec{GroupID: e2eGroup, Topics: []sharestatev1.ShareGroupTopic{{TopicID: e2eTopic, Name: "orders", Partitions: e2ePartitions}},
			Settings: &sharestatev1.ShareGroupSettings{DeliveryCountLimit: ptr32(deliveryLimit)}},
	}
	if err := s.client.Create(ctx, sg); err != nil {
		s.t.Fatal(err)
	}
}

func ptr32(v int32) *int32 { return &v }

// startBrokers starts the brokers' pods and sidecars, a wire client of each sidecar, and each broker's
// share-partition manager on it.
func (s *system) startBrokers(ctx context.Context, leaders *leadership) ([]*broker, []*kafkawire.Client, map[int32]*leader.Manager) {
	s.t.Helper()
	var brokers []*broker
	var stores []*kafkawire.Client
	managers := map[int32]*leader.Manager{}
	for i := range int32(e2eBrokers) {
		b := s.startBroker(ctx, i, 29094+int(i))
		store, err := kafkawire.NewClient(kafkawire.ClientOptions{Address: b.address})
		if err != nil {
			s.t.Fatal(err)
		}
		s.t.Cleanup(func() { _ = store.Close() })
		m, err := leader.NewManager(leader.ManagerOptions{Store: store, LeaderEpoch: leaders.epochFor(i),
			Partition: leader.SharePartitionOptions{MaxDeliveryCount: deliveryLimit, Retry: leader.NoRetry}})
		if err != nil {
			s.t.Fatal(err)
		}
		brokers, stores, managers[i] = append(brokers, b), append(stores, store), m
	}
	s.waitSidecars(ctx, stores)
	return brokers, stores, managers
}

// waitSidecars waits until every sidecar answers over the wire.
func (s *system) waitSidecars(ctx context.Context, stores []*kafkawire.Client) {
	s.t.Helper()
	topic, _ := sharestate.ParseTopicID(e2eTopic)
	for _, store := range stores {
		testenv.Eventually(s.t, 60*time.Second, func() error {
			r := store.ReadSummary(ctx, sharestate.ReadSummaryRequest{GroupID: e2eGroup,
				Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{{TopicID: topic, Partitions: []sharestate.ReadSummaryPartition{{}}}}})
			if code := r.Topics[0].Partitions[0].ErrorCode; code != sharestate.ErrNone {
				return fmt.Errorf("sidecar not answering: %s", code)
			}
			return nil
		})
	}
}

// initializePartitions is the group coordinator's Initialize, at state epoch 0 from offset 0.
func (s *system) initializePartitions(ctx context.Context, store sharestate.Store, topic sharestate.TopicID) {
	s.t.Helper()
	req := sharestate.InitializeRequest{GroupID: e2eGroup, Topics: []sharestate.TopicData[sharestate.InitializePartition]{{TopicID: topic}}}
	for p := range int32(e2ePartitions) {
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, sharestate.InitializePartition{Partition: p, StartOffset: 0})
	}
	for _, r := range store.Initialize(ctx, req).Topics[0].Partitions {
		if r.ErrorCode != sharestate.ErrNone {
			s.t.Fatalf("initialize partition %d: %s %s", r.Partition, r.ErrorCode, r.ErrorMessage)
		}
	}
}

// failBroker deletes a broker's pod once consumers have made progress, waits for the operator to fence
// its partitions, checks that its sidecar's writes are then refused, and moves its partitions to the
// other brokers at a higher leader epoch. It returns how long the fence took. It runs on a goroutine
// of its own: it reports failures with t.Error and goes on (t.Fatal would leave the test waiting).
func (s *system) failBroker(ctx context.Context, t *testing.T, b *broker, store *kafkawire.Client, leaders *leadership, g *ledger, topic sharestate.TopicID) time.Duration {
	err := testenv.Poll(2*time.Minute, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		if n := len(g.final); n < e2ePartitions*60 {
			return fmt.Errorf("%d offsets decided", n)
		}
		return nil
	})
	if err != nil {
		t.Errorf("consumers before the failover: %v", err)
	}
	partitions := leaders.ledBy(b.id)
	leaders.pause(partitions, true)
	start := time.Now()
	if err := s.client.Delete(ctx, b.pod); err != nil {
		t.Error(err)
		return 0
	}
	if err := testenv.Poll(30*time.Second, func() error { return s.fenced(ctx, partitions) }); err != nil {
		t.Errorf("the operator's fence: %v", err) // and go on, so that the consumers can finish
	}
	latency := time.Since(start)

	// The dead broker's sidecar still runs (a zombie): its writes carry the old state epoch.
	for _, p := range partitions {
		w := store.Write(ctx, sharestate.WriteRequest{GroupID: e2eGroup, Topics: []sharestate.TopicData[sharestate.WritePartition]{{TopicID: topic,
			Partitions: []sharestate.WritePartition{{Partition: p, StateEpoch: 0, LeaderEpoch: 1, StartOffset: -1, DeliveryCompleteCount: -1,
				StateBatches: []sharestate.StateBatch{{FirstOffset: 0, LastOffset: 199, DeliveryState: sharestate.DeliveryStateAcknowledged, DeliveryCount: 1}}}}}}})
		if code := w.Topics[0].Partitions[0].ErrorCode; code != sharestate.ErrFencedStateEpoch {
			t.Errorf("the fenced broker's write to partition %d: %s, want FENCED_STATE_EPOCH", p, code)
		}
	}
	leaders.move(partitions, func(p int32) int32 { return (b.id + 1 + p%2) % e2eBrokers })
	leaders.pause(partitions, false)
	return latency
}

// fenced checks that the operator raised the partitions' state epoch and cleared their leader.
func (s *system) fenced(ctx context.Context, partitions []int32) error {
	for _, p := range partitions {
		var obj sharestatev1.SharePartitionState
		if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.brokersNS, Name: sharestatev1.SharePartitionStateName(e2eGroup, e2eTopic, p)}, &obj); err != nil {
			return err
		}
		if obj.Status.StateEpoch < 1 || obj.Status.Leader != nil {
			return fmt.Errorf("partition %d not fenced: state epoch %d, leader %+v", p, obj.Status.StateEpoch, obj.Status.Leader)
		}
	}
	return nil
}

// watchStored checks every stored version of the partitions' state against the consumers' decisions,
// until ctx ends. A watch that ends, or a request that fails, is no violation: Follow watches again
// from where it was, so the check goes on (after a 410 Gone it lists again, and the versions in
// between are not seen).
func (s *system) watchStored(ctx context.Context, c client.WithWatch, g *ledger) {
	_ = testenv.Follow(ctx, c, &sharestatev1.SharePartitionStateList{}, s.brokersNS, func(ev watch.EventType, o client.Object) bool {
		obj, ok := o.(*sharestatev1.SharePartitionState)
		if !ok || ev == watch.Deleted {
			return false
		}
		stored := make([]string, len(obj.Status.StateBatches))
		for i, b := range obj.Status.StateBatches {
			stored[i] = string(b)
		}
		batches, err := sharestate.DecodeBatches(stored)
		g.mu.Lock()
		if err != nil {
			g.violate("partition %d: corrupt stored state: %v", obj.Spec.Partition, err)
		}
		g.mu.Unlock()
		g.checkStored(obj.Spec.Partition, batches)
		return false
	})
}

// resetWithPlugin resets the group's offsets to 300 with the kubectl plugin, once phase 2 is under
// way (a consumer has decided an offset of it: a fixed delay may end before that on a loaded machine),
// and returns when the plugin reported it done. It runs on a goroutine of its own.
func (s *system) resetWithPlugin(t *testing.T, g *ledger) {
	err := testenv.Poll(2*time.Minute, func() error {
		g.mu.Lock()
		defer g.mu.Unlock()
		for k := range g.final {
			if k.offset >= 200 {
				return nil
			}
		}
		return errors.New("no offset of phase 2 decided")
	})
	if err != nil {
		t.Errorf("waiting for phase 2: %v", err) // and reset anyway, so that the consumers can finish
	}
	out, err := s.plugin("-n", s.brokersNS, "reset-offsets", "orders", "--topic", e2eTopic, "--to-offset", "300", "--id", "e2e-reset", "--timeout", "2m", "--execute")
	if err != nil {
		t.Errorf("kubectl sharestate reset-offsets: %v\n%s", err, out)
	}
	t.Logf("kubectl sharestate reset-offsets:\n%s", out)
}

// allStartAt reports whether every partition's stored start offset reached offset.
func (s *system) allStartAt(ctx context.Context, offset int64) bool {
	var list sharestatev1.SharePartitionStateList
	if err := s.client.List(ctx, &list, client.InNamespace(s.brokersNS)); err != nil || len(list.Items) < e2ePartitions {
		return false
	}
	for _, obj := range list.Items {
		if obj.Status.StartOffset < offset {
			return false
		}
	}
	return true
}

// expectStartOffsets checks, through a sidecar's ReadSummary, that every partition is done up to offset.
func (s *system) expectStartOffsets(ctx context.Context, store sharestate.Store, topic sharestate.TopicID, offset int64) {
	s.t.Helper()
	testenv.Eventually(s.t, 60*time.Second, func() error {
		req := sharestate.ReadSummaryRequest{GroupID: e2eGroup, Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{{TopicID: topic}}}
		for p := range int32(e2ePartitions) {
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, sharestate.ReadSummaryPartition{Partition: p})
		}
		var behind []string
		for _, r := range store.ReadSummary(ctx, req).Topics[0].Partitions {
			if r.ErrorCode != sharestate.ErrNone || r.StartOffset != offset {
				behind = append(behind, fmt.Sprintf("%d:%s@%d", r.Partition, r.ErrorCode, r.StartOffset))
			}
		}
		if len(behind) > 0 {
			return fmt.Errorf("partitions not done up to %d: %s", offset, strings.Join(behind, " "))
		}
		return nil
	})
}

// expectResetEpoch checks that the reset ran once, at a state epoch above every partition's before it
// (broker 1's fenced partitions were at 1, the others at 0), and that every partition holds it.
func (s *system) expectResetEpoch(ctx context.Context) {
	s.t.Helper()
	var sg sharestatev1.ShareGroup
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: s.brokersNS, Name: "orders"}, &sg); err != nil {
		s.t.Fatal(err)
	}
	r := sg.Status.LastOffsetReset
	if r == nil || r.ID != "e2e-reset" || r.CompletionTime == nil || r.StateEpoch != 2 || r.Partitions != e2ePartitions {
		s.t.Fatalf("last reset %+v, want e2e-reset done at state epoch 2 over %d partitions", r, e2ePartitions)
	}
	var list sharestatev1.SharePartitionStateList
	if err := s.client.List(ctx, &list, client.InNamespace(s.brokersNS)); err != nil {
		s.t.Fatal(err)
	}
	for _, obj := range list.Items {
		if obj.Status.StateEpoch != 2 {
			s.t.Errorf("partition %d at state epoch %d after the reset, want 2", obj.Spec.Partition, obj.Status.StateEpoch)
		}
	}
}
