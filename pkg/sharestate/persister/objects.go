package persister

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// This file maps a share-partition's State to and from the status of its SharePartitionState.

// stateOf returns the state an object holds: nil when it is absent or not initialized yet (created,
// but its first status write did not happen), and an error when its stored batches are corrupt.
func stateOf(obj *sharestatev1.SharePartitionState) (*sharestate.State, error) {
	if obj == nil || obj.Status.CreateTime == nil {
		return nil, nil
	}
	batches, err := StoredBatches(&obj.Status)
	if err != nil {
		return nil, fmt.Errorf("stored state of %s/%s is corrupt: %w", obj.Namespace, obj.Name, err)
	}
	return &sharestate.State{
		StateEpoch:            obj.Status.StateEpoch,
		LeaderEpoch:           obj.Status.LeaderEpoch,
		StartOffset:           obj.Status.StartOffset,
		DeliveryCompleteCount: obj.Status.DeliveryCompleteCount,
		Batches:               batches,
	}, nil
}

// setState writes st into the object's status, keeping what the operator owns (conditions,
// observedGeneration) as it is.
func setState(obj *sharestatev1.SharePartitionState, st sharestate.State) {
	obj.Status.StateEpoch = st.StateEpoch
	obj.Status.LeaderEpoch = st.LeaderEpoch
	obj.Status.StartOffset = st.StartOffset
	obj.Status.DeliveryCompleteCount = st.DeliveryCompleteCount
	obj.Status.StateBatches = StorageForm(st.Batches)
	inFlight := sharestate.InFlightRecords(st.Batches)
	obj.Status.InFlightRecords = &inFlight
}

// StoredBatches decodes the state batches a status stores (semantics §7's invariants checked: sorted,
// not overlapping). The operator, the plugin and the benchmarks read stored batches through it too.
func StoredBatches(status *sharestatev1.SharePartitionStateStatus) ([]sharestate.StateBatch, error) {
	stored := make([]string, len(status.StateBatches))
	for i, b := range status.StateBatches {
		stored[i] = string(b)
	}
	return sharestate.DecodeBatches(stored)
}

// StorageForm encodes batches as a status stores them; none is nil.
func StorageForm(batches []sharestate.StateBatch) []sharestatev1.StateBatch {
	if len(batches) == 0 {
		return nil
	}
	out := make([]sharestatev1.StateBatch, len(batches))
	for i, b := range batches {
		out[i] = sharestatev1.StateBatch(sharestate.FormatBatch(b))
	}
	return out
}

// resetState replaces the object's state with a fresh one (Initialize at a higher state epoch), with
// the conditions that follow from it.
func resetState(obj *sharestatev1.SharePartitionState, st sharestate.State, now metav1.Time) {
	setState(obj, st)
	obj.Status.Leader = nil
	obj.Status.CreateTime = &now
	obj.Status.WriteTime = &now
	obj.Status.WriteCount = 0
	obj.SetObservedConditions()
}

// recordWrite stamps a write: its time, the write counter and the leader that made it.
func recordWrite(obj *sharestatev1.SharePartitionState, id Identity, leaderEpoch int32, now metav1.Time) {
	obj.Status.WriteTime = &now
	obj.Status.WriteCount++
	recordLeader(obj, id, leaderEpoch, now)
}

// recordLeader records the caller as the partition's leader. since moves only when the leader or its
// epoch changes, so it says how long the current leadership has lasted.
func recordLeader(obj *sharestatev1.SharePartitionState, id Identity, leaderEpoch int32, now metav1.Time) {
	if isLeader(obj, id, leaderEpoch) {
		return
	}
	obj.Status.Leader = &sharestatev1.LeaderRef{
		BrokerID: id.BrokerID, PodName: id.PodName, PodUID: id.PodUID,
		LeaderEpoch: leaderEpoch, Since: now,
	}
	// The conditions that follow from the new leader, as the operator would set them: its own write
	// is then skipped as unchanged, instead of moving the object under the leader's next Write.
	obj.SetObservedConditions()
}

// isLeader reports whether the object already records the caller, at that leader epoch, as leader.
func isLeader(obj *sharestatev1.SharePartitionState, id Identity, leaderEpoch int32) bool {
	l := obj.Status.Leader
	return l != nil && l.BrokerID == id.BrokerID && l.PodName == id.PodName && l.PodUID == id.PodUID &&
		l.LeaderEpoch == leaderEpoch
}

// fencedPod refuses a Read or Write from the pod the operator fenced because it is gone (semantics §9,
// status.fencedLeader): the same pod UID at a leader epoch no higher than the one it was fenced at.
// Without it a terminating broker, told FENCED, would Read again, as Kafka's share-partition leader
// does, and become the recorded leader once more. A leader epoch above the fenced one is a new
// leadership that Kafka's controller granted, and is let through.
func fencedPod(obj *sharestatev1.SharePartitionState, id Identity, leaderEpoch int32) sharestate.Outcome {
	f := obj.Status.FencedLeader
	if f == nil || f.PodUID == "" || f.PodUID != id.PodUID || leaderEpoch > f.LeaderEpoch {
		return sharestate.Outcome{}
	}
	return sharestate.Fail(sharestate.ErrFencedLeaderEpoch, "pod %s (uid %s) was fenced at leader epoch %d because it is gone; leader epoch %d does not lead",
		f.PodName, f.PodUID, f.LeaderEpoch, leaderEpoch)
}

// newObject is a SharePartitionState for the key, owned by its ShareGroup, with the topic's name when
// the group declares one (Kafka's requests carry the topic id alone; the name is for people, in the
// TOPIC column of kubectl get sps).
func newObject(namespace string, key partitionKey, owner *sharestatev1.ShareGroup) *sharestatev1.SharePartitionState {
	obj := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      key.objectName(),
			// No leader yet: the persister that records one sets the leader-pod label then.
			Labels: map[string]string{sharestatev1.LabelShareGroup: owner.Name, sharestatev1.LabelLeaderPod: ""},
		},
		Spec: sharestatev1.SharePartitionStateSpec{
			GroupID:   sharestatev1.GroupID(key.group),
			TopicID:   sharestatev1.TopicID(key.topic.String()),
			TopicName: owner.DeclaredTopicName(sharestatev1.TopicID(key.topic.String())),
			Partition: key.partition,
		},
	}
	obj.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, sharestatev1.GroupVersion.WithKind("ShareGroup"))}
	return obj
}

// partitionKey identifies a share-partition.
type partitionKey struct {
	group     string
	topic     sharestate.TopicID
	partition int32
}

func (k partitionKey) objectName() string {
	return sharestatev1.SharePartitionStateName(k.group, k.topic.String(), k.partition)
}

// estimateStatusBytes estimates the JSON size of a stored status: the batches dominate it. It avoids
// marshalling the status again on the write path just to measure it.
func estimateStatusBytes(obj *sharestatev1.SharePartitionState) int {
	n := 400 // the fixed fields, leader and times
	for _, b := range obj.Status.StateBatches {
		n += len(b) + 3
	}
	return n
}
