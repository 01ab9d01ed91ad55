package localcluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// The stand-in broker plays, for one share group, the two parts of a Kafka broker that call the
// persister, so that `make run` shows share state without Kafka: the group coordinator, which
// initializes the group's share-partitions, and their share-partition leader (pkg/sharestate/leader,
// as the end-to-end tests run it), whose share consumer acquires and acknowledges records of a log
// that grows. Both reach the persister through the sidecar over Kafka's protocol (kafkawire.Client),
// as a broker does.

// StandInOptions configure RunStandIn. Config, GroupID and Address are required.
type StandInOptions struct {
	// Config reaches the API server, where the stand-in finds the group's ShareGroup.
	Config *rest.Config
	// Namespace holds the ShareGroup (default "default").
	Namespace string
	// GroupID is the share group consumed. The stand-in waits for a ShareGroup of this group id that
	// declares a topic, and consumes that topic's first partitions.
	GroupID string
	// Partitions is how many of them it leads, from partition 0 (default 4; at most as many as declared).
	Partitions int32
	// Address is the sidecar's Kafka-protocol listener.
	Address string
	// Interval is the time between two rounds of the consumer (default 2s).
	Interval time.Duration
	// Logger receives what the stand-in does.
	Logger logr.Logger
}

// The stand-in's parts, as they call themselves.
const (
	// standInStateEpoch is the state epoch of the stand-in coordinator's Initialize, as Kafka's group
	// coordinator initializes at the group's epoch (1 for a group that never changed).
	standInStateEpoch = 1
	// standInMember is the stand-in share consumer's member id.
	standInMember = "stand-in-consumer"
)

// RunStandIn plays the broker for opts.GroupID until ctx ends: it waits for the group's ShareGroup,
// initializes the partitions that have no state (once: a group deleted later is not brought back),
// leads them at a leader epoch above any stored one (a new leadership, as after a broker restart),
// and runs a consumer a round every Interval. Fencing and resets are the persister's to decide; the
// stand-in logs each partition's answer when it changes, and carries on as a broker would: a leader
// fenced by a reset Reads again and goes on; one whose pod was deleted is refused from then on.
func RunStandIn(ctx context.Context, opts StandInOptions) error {
	if err := opts.setDefaults(); err != nil {
		return err
	}
	group, err := waitForGroup(ctx, opts)
	if err != nil {
		return err
	}
	topic, err := sharestate.ParseTopicID(string(group.Spec.Topics[0].TopicID))
	if err != nil {
		return err
	}
	partitions := make([]int32, min(opts.Partitions, group.Spec.Topics[0].Partitions))
	for i := range partitions {
		partitions[i] = int32(i)
	}
	store, err := kafkawire.NewClient(kafkawire.ClientOptions{Address: opts.Address, ClientID: "stand-in-broker"})
	if err != nil {
		return err
	}
	defer func() { _ = store.Close() }()
	summaries, err := initializeMissing(ctx, store, opts.GroupID, topic, partitions, opts.Logger)
	if err != nil {
		return err
	}
	c, err := newStandInConsumer(store, group, topic, summaries, opts.Logger)
	if err != nil {
		return err
	}
	go c.mgr.Run(ctx) // acquisition locks that time out
	return c.run(ctx, opts.Interval)
}

func (o *StandInOptions) setDefaults() error {
	switch {
	case o.Config == nil:
		return errors.New("stand-in broker: no Config")
	case o.GroupID == "":
		return errors.New("stand-in broker: no GroupID")
	case o.Address == "":
		return errors.New("stand-in broker: no sidecar Address")
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	if o.Partitions <= 0 {
		o.Partitions = 4
	}
	if o.Interval <= 0 {
		o.Interval = 2 * time.Second
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return nil
}

// waitForGroup returns the ShareGroup of opts.GroupID once one exists that declares a topic.
func waitForGroup(ctx context.Context, opts StandInOptions) (*sharestatev1.ShareGroup, error) {
	scheme := k8sruntime.NewScheme()
	if err := sharestatev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl, err := client.New(opts.Config, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	for waited := false; ; waited = true {
		var groups sharestatev1.ShareGroupList
		if err := cl.List(ctx, &groups, client.InNamespace(opts.Namespace)); err == nil {
			for i := range groups.Items {
				if g := &groups.Items[i]; string(g.Spec.GroupID) == opts.GroupID && len(g.Spec.Topics) > 0 {
					return g, nil
				}
			}
		}
		if !waited {
			opts.Logger.Info("Waiting for a ShareGroup of the group id that declares a topic", "namespace", opts.Namespace, "groupId", opts.GroupID)
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(2 * time.Second):
		}
	}
}

// initializeMissing plays the group coordinator: it reads the partitions' summaries and initializes
// those that have no state (a summary of state epoch 0 and no start offset; the stand-in never
// initializes at epoch 0), and returns the summaries it read. A retriable answer (the sidecar is
// still starting, say) is asked again until ctx ends.
func initializeMissing(ctx context.Context, store sharestate.Store, groupID string, topic sharestate.TopicID, partitions []int32,
	log logr.Logger) ([]sharestate.ReadSummaryResult, error) {
	req := sharestate.ReadSummaryRequest{GroupID: groupID, Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{{TopicID: topic}}}
	for _, p := range partitions {
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, sharestate.ReadSummaryPartition{Partition: p})
	}
	summaries, err := untilAnswered(ctx, func() []sharestate.ReadSummaryResult { return store.ReadSummary(ctx, req).Topics[0].Partitions },
		func(r sharestate.ReadSummaryResult) sharestate.PartitionResult { return r.PartitionResult })
	if err != nil {
		return nil, fmt.Errorf("reading the summaries of group %s: %w", groupID, err)
	}
	init := sharestate.InitializeRequest{GroupID: groupID, Topics: []sharestate.TopicData[sharestate.InitializePartition]{{TopicID: topic}}}
	for _, s := range summaries {
		if s.StateEpoch == 0 && s.StartOffset == -1 {
			init.Topics[0].Partitions = append(init.Topics[0].Partitions,
				sharestate.InitializePartition{Partition: s.Partition, StateEpoch: standInStateEpoch, StartOffset: -1})
		}
	}
	if len(init.Topics[0].Partitions) == 0 {
		return summaries, nil
	}
	if _, err := untilAnswered(ctx, func() []sharestate.PartitionResult { return store.Initialize(ctx, init).Topics[0].Partitions },
		func(r sharestate.PartitionResult) sharestate.PartitionResult { return r }); err != nil {
		return nil, fmt.Errorf("initializing group %s: %w", groupID, err)
	}
	log.Info("Initialized the share-partitions", "groupId", groupID, "topicId", topic.String(), "partitions", len(init.Topics[0].Partitions))
	return summaries, nil
}

// untilAnswered calls call until no partition's answer is retriable, then returns the answers, or an
// error naming the first partition answered with an error.
func untilAnswered[R any](ctx context.Context, call func() []R, result func(R) sharestate.PartitionResult) ([]R, error) {
	for {
		answers := call()
		retry := false
		for _, a := range answers {
			r := result(a)
			if r.ErrorCode.Retriable() {
				retry = true
				break
			}
			if r.ErrorCode != sharestate.ErrNone {
				return nil, fmt.Errorf("partition %d: %s %s", r.Partition, r.ErrorCode, r.ErrorMessage)
			}
		}
		if !retry {
			return answers, nil
		}
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-time.After(time.Second):
		}
	}
}
