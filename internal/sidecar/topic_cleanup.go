package sidecar

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/metricsreg"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// Kafka's share coordinator removes a deleted topic's share state by itself, from the metadata
// update that deletes the topic, and sends no DeleteShareGroupState RPC for it
// (ShareCoordinatorService.onMetadataUpdate -> handleTopicsDeletion ->
// ShareCoordinatorShard.maybeCleanupShareState in 4.4.0; BrokerMetadataPublisher ->
// ShareCoordinator.onTopicsDeleted in 4.2.2; docs/kafka-integration.md §2). With the proxy answering
// keys 83–87, that state is in SharePartitionStates, so the sidecar removes it: the objects of topic
// ids absent from the upstream's metadata.
//
// Deleting share state cannot be undone, so only what two reads agree on goes: a topic id absent from
// two consecutive complete Metadata answers of the same cluster, at least one period apart, and only
// objects listed before the first of them was sent (a topic created meanwhile may not be in the
// broker's metadata yet, and its object may be younger than the first answer).

// shareGroupStateTopic is Kafka's share-state topic. A Kafka persister creates it before any share
// state exists (FindCoordinator of key type SHARE creates it), so an answer without it is not taken
// as the list of all topics: an authorizer that hides topics from the sidecar hides this one too.
const shareGroupStateTopic = "__share_group_state"

// topicsRead is one complete Metadata answer: when it was sent, the cluster, the topic ids, and the
// UIDs of the SharePartitionStates listed before it was sent (nil: the list failed).
type topicsRead struct {
	sent         time.Time
	clusterID    string
	topics       map[sharestatev1.TopicID]bool
	listedBefore map[types.UID]bool
}

// newTopicsRead keeps a Metadata answer fit to decide deletions on, or says why it is not: no cluster
// id, a topic with an error or without an id, or no __share_group_state.
func newTopicsRead(sent time.Time, md *kafkawire.ClusterMetadata, listed []sharestatev1.SharePartitionState, listErr error) (topicsRead, error) {
	if md.ClusterID == "" {
		return topicsRead{}, errors.New("the answer names no cluster id")
	}
	r := topicsRead{sent: sent, clusterID: md.ClusterID, topics: make(map[sharestatev1.TopicID]bool, len(md.Topics))}
	stateTopic := false
	for _, t := range md.Topics {
		if t.ErrorCode != 0 {
			return topicsRead{}, fmt.Errorf("topic %q has error code %d", t.Name, t.ErrorCode)
		}
		if t.ID.IsZero() {
			return topicsRead{}, fmt.Errorf("topic %q has no id", t.Name)
		}
		r.topics[sharestatev1.TopicID(t.ID.String())] = true
		stateTopic = stateTopic || t.Name == shareGroupStateTopic
	}
	if !stateTopic {
		return topicsRead{}, errors.New("the answer lists no " + shareGroupStateTopic)
	}
	if listErr == nil {
		r.listedBefore = make(map[types.UID]bool, len(listed))
		for _, s := range listed {
			r.listedBefore[s.UID] = true
		}
	}
	return r, nil
}

// statesOfDeletedTopics picks, from states (listed before second was sent), the ones whose topic is
// gone: absent from both reads, first and second, consecutive complete answers of the same cluster at
// least minGap apart, and listed before first was sent. Objects already being deleted are left out.
func statesOfDeletedTopics(first, second topicsRead, minGap time.Duration, states []sharestatev1.SharePartitionState) []sharestatev1.SharePartitionState {
	if first.listedBefore == nil || first.clusterID != second.clusterID || second.sent.Sub(first.sent) < minGap {
		return nil
	}
	var gone []sharestatev1.SharePartitionState
	for _, s := range states {
		topic := s.Spec.TopicID
		if s.DeletionTimestamp != nil || !first.listedBefore[s.UID] || first.topics[topic] || second.topics[topic] {
			continue
		}
		gone = append(gone, s)
	}
	return gone
}

// topicCleanup deletes the SharePartitionStates of deleted topics in one namespace.
type topicCleanup struct {
	c         client.Client
	namespace string
	minGap    time.Duration
	deleted   prometheus.Counter
	log       logr.Logger

	last *topicsRead // the previous round's complete read; nil after a failed or incomplete one
}

func newTopicCleanup(c client.Client, namespace string, minGap time.Duration, reg prometheus.Registerer, log logr.Logger) (*topicCleanup, error) {
	deleted, err := metricsreg.Register(reg, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sharestate_deleted_topic_states_deleted_total",
		Help: "SharePartitionStates the sidecar deleted because their topic no longer exists in Kafka.",
	}))
	if err != nil {
		return nil, err
	}
	return &topicCleanup{c: c, namespace: namespace, minGap: minGap, deleted: deleted, log: log}, nil
}

// listPageSize bounds the objects of one List page: each may hold up to 40 KB of state batches.
const listPageSize = 500

// list lists the namespace's SharePartitionStates, page by page.
func (tc *topicCleanup) list(ctx context.Context) ([]sharestatev1.SharePartitionState, error) {
	var all []sharestatev1.SharePartitionState
	opts := []client.ListOption{client.InNamespace(tc.namespace), client.Limit(listPageSize)}
	for cont := ""; ; {
		var page sharestatev1.SharePartitionStateList
		if err := tc.c.List(ctx, &page, append(opts, client.Continue(cont))...); err != nil {
			return nil, fmt.Errorf("listing the SharePartitionStates of %s: %w", tc.namespace, err)
		}
		all = append(all, page.Items...)
		if cont = page.Continue; cont == "" {
			return all, nil
		}
	}
}

// forget drops the previous read: the next one cannot be compared with it.
func (tc *topicCleanup) forget() { tc.last = nil }

// observe compares a complete read with the previous one and deletes what both show gone; states is
// the list taken before read was sent.
func (tc *topicCleanup) observe(ctx context.Context, read topicsRead, states []sharestatev1.SharePartitionState) {
	prev := tc.last
	tc.last = &read
	if prev == nil || read.listedBefore == nil {
		return
	}
	for _, s := range statesOfDeletedTopics(*prev, read, tc.minGap, states) {
		tc.delete(ctx, s)
	}
}

// delete deletes one object, on the condition that it is still the object listed (UID) unchanged
// (resourceVersion): an object created again, or written, since the list is left for the next round.
func (tc *topicCleanup) delete(ctx context.Context, s sharestatev1.SharePartitionState) {
	log := tc.log.WithValues("sharePartitionState", klog.KObj(&s), "groupId", s.Spec.GroupID,
		"topicId", s.Spec.TopicID, "topicName", s.Spec.TopicName, "partition", s.Spec.Partition)
	uid, rv := s.UID, s.ResourceVersion
	err := tc.c.Delete(ctx, &s, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case err == nil:
		tc.deleted.Inc()
		log.Info("Deleted the share state of a topic that no longer exists")
	case apierrors.IsNotFound(err):
		// Another broker's sidecar deleted it first.
	case apierrors.IsConflict(err):
		log.V(1).Info("The share state of a deleted topic changed since it was listed; left for the next round")
	default:
		log.Error(err, "Deleting the share state of a deleted topic failed; retried next round")
	}
}
