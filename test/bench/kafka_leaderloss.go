package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

const (
	lossTopic     = "loss"
	lossPartition = 0
	// lossDrain is how long after the kill a record may still come from what the consumer fetched
	// from the dead leader before it died: a delivery after it can only be the new leader's, since
	// the controller moves leadership only once the dead broker's session (6 s) has expired.
	lossDrain = time.Second
)

// lossSystem is one system of the leader-loss family, with its producer and timed consumer running.
type lossSystem struct {
	*kafkaSystem
	producer *kafkacluster.Producer
	consumer *kafkacluster.TimedConsumer
	times    []time.Duration
}

// measureLeaderLoss times, on two clusters side by side (Kafka's persister and ours), the loss of a
// partition's leader: SIGKILL of the broker, then the time until the share consumer first receives
// a record of that partition from its new leader, which has read the partition's share state from
// the persister. The killed broker is restarted and back in sync before the next trial; the trials
// alternate between the systems.
func (k *kafkaRun) measureLeaderLoss(ctx context.Context) error {
	var systems []*lossSystem
	defer func() {
		for _, s := range systems {
			s.stopClients()
			s.stop()
		}
	}()
	for _, ours := range []bool{false, true} {
		s, err := k.startLossSystem(ctx, "loss-"+persisterName(ours), ours)
		if err != nil {
			return err
		}
		systems = append(systems, s)
	}
	for trial := range k.cfg.Trials {
		order := slices.Clone(systems)
		if trial%2 == 1 {
			slices.Reverse(order)
		}
		for _, s := range order {
			d, leader, err := k.loseLeader(ctx, s)
			if err != nil {
				return fmt.Errorf("%s, trial %d: %w", s.name, trial+1, err)
			}
			s.times = append(s.times, d)
			k.report.line(kafkaLeaderLoss, "persister", persisterName(s.ns != ""), "trial", trial+1, "killed_node", leader,
				"first_delivery_s", d.Seconds())
		}
	}
	kafka, ours := medianDuration(systems[0].times), medianDuration(systems[1].times)
	k.report.line(kafkaLeaderLoss, "kafka_median_s", kafka.Seconds(), "ours_median_s", ours.Seconds(), "trials", k.cfg.Trials)
	k.report.check("leader loss to first delivery by the new leader: ours / Kafka's (median)", ours.Seconds()/kafka.Seconds(), true, 1.2, "×",
		fmt.Sprintf("(%.1f s / %.1f s)", ours.Seconds(), kafka.Seconds()))
	return nil
}

func (k *kafkaRun) startLossSystem(ctx context.Context, name string, ours bool) (*lossSystem, error) {
	sys, err := k.startSystem(ctx, name, ours, nil)
	if err != nil {
		return nil, err
	}
	s := &lossSystem{kafkaSystem: sys}
	group := lossTopic + "-share"
	if _, err := s.clients.Setup(ctx, lossTopic, 3, 3, group); err != nil {
		return s, err
	}
	if s.producer, err = s.clients.StartProduceLoop("loss-producer", lossTopic, 2*time.Hour, 300); err != nil {
		return s, err
	}
	if s.consumer, err = s.clients.StartTimedConsumer("loss-consumer", lossTopic, group); err != nil {
		return s, err
	}
	if !waitFor(ctx, 2*time.Minute, func() bool { _, ok := s.consumer.FirstDelivery(lossPartition, time.Time{}); return ok }) {
		return s, fmt.Errorf("%s: the consumer received nothing of partition %d in 2 minutes", name, lossPartition)
	}
	return s, nil
}

func (s *lossSystem) stopClients() {
	if s.consumer != nil {
		s.consumer.Stop()
	}
	if s.producer != nil {
		s.producer.Kill()
	}
}

// loseLeader kills the leader of lossPartition, times the first delivery after it, then restarts
// the broker and waits until every replica is in sync again.
func (k *kafkaRun) loseLeader(ctx context.Context, s *lossSystem) (time.Duration, int32, error) {
	// Steady first: deliveries of the partition in the last seconds.
	if !waitFor(ctx, time.Minute, func() bool {
		_, ok := s.consumer.FirstDelivery(lossPartition, time.Now().Add(-2*time.Second))
		return ok
	}) {
		return 0, -1, fmt.Errorf("no delivery of partition %d in the minute before the kill", lossPartition)
	}
	leaders, err := s.clients.Leaders(ctx, lossTopic)
	if err != nil {
		return 0, -1, err
	}
	leader := leaders[lossPartition]
	node := s.cluster.Node(leader)
	if node == nil {
		return 0, leader, fmt.Errorf("partition %d has no leader (%d)", lossPartition, leader)
	}
	killed := time.Now()
	node.Kill()
	var first time.Time
	if !waitFor(ctx, 3*time.Minute, func() bool {
		var ok bool
		first, ok = s.consumer.FirstDelivery(lossPartition, killed.Add(lossDrain))
		return ok
	}) {
		return 0, leader, fmt.Errorf("no delivery of partition %d within 3 minutes of killing node %d", lossPartition, leader)
	}
	if err := node.Restart(3 * time.Minute); err != nil {
		return 0, leader, err
	}
	return first.Sub(killed), leader, k.awaitInSync(ctx, s.kafkaSystem, lossTopic)
}

// awaitInSync waits until every partition of topic has a leader and three in-sync replicas.
func (k *kafkaRun) awaitInSync(ctx context.Context, s *kafkaSystem, topic string) error {
	var last error
	if waitFor(ctx, 3*time.Minute, func() bool {
		parts, err := s.clients.Partitions(ctx, topic)
		if err != nil {
			last = err
			return false
		}
		for p, info := range parts {
			if info.Leader < 0 || info.ISR < 3 {
				last = fmt.Errorf("partition %d: leader %d, %d in sync", p, info.Leader, info.ISR)
				return false
			}
		}
		return true
	}) {
		return nil
	}
	return fmt.Errorf("%s not back in sync in 3 minutes: %w", topic, last)
}

func medianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
