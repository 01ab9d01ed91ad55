package v1alpha1

// Condition types of SharePartitionState.
const (
	// ConditionInitialized is True once the share-partition's state has been initialized.
	ConditionInitialized = "Initialized"
	// ConditionFenced is True when the operator raised the state epoch to fence a stale leader, until a
	// new leader Reads the state.
	ConditionFenced = "Fenced"
)

// Condition types of ShareGroup.
const (
	// ConditionReady is True when every share-partition of the group is initialized, none is fenced,
	// and each is of a partition spec.topics declares.
	ConditionReady = "Ready"
	// ConditionOffsetReset reports the last offset reset request: True when done, False when refused.
	ConditionOffsetReset = "OffsetReset"
	// ConditionMisnamedPartitionStates is True when SharePartitionStates of the group's id exist under
	// names that are not derived from their key (created by hand): nothing reads them, and the
	// operator does not adopt them.
	ConditionMisnamedPartitionStates = "MisnamedPartitionStates"
)

// Condition reasons.
const (
	// ReasonStateInitialized: the persister initialized the state.
	ReasonStateInitialized = "StateInitialized"
	// ReasonNotInitialized: the object exists but the persister has not initialized its state.
	ReasonNotInitialized = "NotInitialized"
	// ReasonLeaderPodDeleted: the recorded leader's pod no longer exists.
	ReasonLeaderPodDeleted = "LeaderPodDeleted"
	// ReasonLeaderPodTerminating: the recorded leader's pod is being deleted.
	ReasonLeaderPodTerminating = "LeaderPodTerminating"
	// ReasonLeaderPodFinished: the recorded leader's pod is in phase Failed or Succeeded.
	ReasonLeaderPodFinished = "LeaderPodFinished"
	// ReasonLeaderPodReplaced: a pod of the recorded name exists with another UID.
	ReasonLeaderPodReplaced = "LeaderPodReplaced"
	// ReasonLeaderPodNotReady: the recorded leader's pod was not Ready for longer than the grace period.
	ReasonLeaderPodNotReady = "LeaderPodNotReady"
	// ReasonStateEpochExhausted: the recorded leader is stale, but the state epoch is at its maximum
	// (2147483647) and cannot be raised to fence it; or a reset would need a state epoch above it.
	ReasonStateEpochExhausted = "StateEpochExhausted"
	// ReasonLeaderAlive: a leader holds the partition.
	ReasonLeaderAlive = "LeaderAlive"
	// ReasonNoLeader: no leader has read the state yet.
	ReasonNoLeader = "NoLeader"
	// ReasonAllPartitionsReady: every partition is initialized and none is fenced.
	ReasonAllPartitionsReady = "AllPartitionsReady"
	// ReasonPartitionsFenced: some partitions are fenced.
	ReasonPartitionsFenced = "PartitionsFenced"
	// ReasonPartitionsNotInitialized: some partitions are not initialized.
	ReasonPartitionsNotInitialized = "PartitionsNotInitialized"
	// ReasonUndeclaredPartitionStates: the group has the state of partitions its spec.topics does not
	// declare (a topic re-created under a new id, or declared with fewer partitions since): the brokers
	// are answered UNKNOWN_TOPIC_OR_PARTITION for them, and nothing reads that state.
	ReasonUndeclaredPartitionStates = "UndeclaredPartitionStates"
	// ReasonResetCompleted: the offset reset request was carried out.
	ReasonResetCompleted = "ResetCompleted"
	// ReasonResetUndeclaredTopic: the offset reset names a topic that spec.topics does not declare.
	ReasonResetUndeclaredTopic = "ResetUndeclaredTopic"
	// ReasonResetUndeclaredPartition: the offset reset names a partition at or above its topic's
	// declared partition count.
	ReasonResetUndeclaredPartition = "ResetUndeclaredPartition"
	// ReasonResetNoPartitions: the group declares no topics, the offset reset names a topic without
	// listing its partitions, and no state of that topic exists to say which partitions it has.
	ReasonResetNoPartitions = "ResetNoPartitions"
	// ReasonResetRefused: the Ready condition's reason while the group's offset reset request is refused.
	ReasonResetRefused = "ResetRefused"
	// ReasonResetInProgress: the offset reset has started and not finished.
	ReasonResetInProgress = "ResetInProgress"
	// ReasonNoPartitions: the group has no share-partitions yet.
	ReasonNoPartitions = "NoPartitions"
	// ReasonNoPartitionFenced: no partition of the group is fenced.
	ReasonNoPartitionFenced = "NoPartitionFenced"
	// ReasonNameNotDerivedFromKey: some SharePartitionStates are under names not derived from their key.
	ReasonNameNotDerivedFromKey = "NameNotDerivedFromKey"
	// ReasonNamesDerivedFromKeys: every SharePartitionState of the group is under its derived name.
	ReasonNamesDerivedFromKeys = "NamesDerivedFromKeys"
)

// FinalizerPartitionState is the ShareGroup finalizer with which the operator deletes the group's
// share-partition state before the group goes.
const FinalizerPartitionState = "sharestate.dev/partition-state"

// LabelShareGroup is set on every SharePartitionState to its ShareGroup's name, so a group's
// partitions can be listed by label.
const LabelShareGroup = "sharestate.dev/share-group"

// LabelLeaderPod is set on every SharePartitionState to the pod of its recorded leader
// (LeaderPodLabelValue of status.leader.podName), so that the operator finds the partitions a pod
// leads by a label selector when the pod goes, without watching the partitions. The persister sets it
// at creation (empty: no leader yet) and whenever it records a leader on another pod, in a patch of its
// own conditional on the resourceVersion of the status write; the operator's periodic resync adopts
// objects without it and repairs it. It is a hint: status.leader decides. A partition without a
// leader (fenced, reset) keeps the label of its last leader.
const LabelLeaderPod = "sharestate.dev/leader-pod"

// LabelBrokerID is set by each broker's sidecar on its own pod to the broker's Kafka node id
// (--broker-id). A sidecar that answers a Read or Write sent by another broker (proxy mode: Kafka's
// persister calls the share coordinator of the key) finds the sender's pod by this label, to record
// that pod as the partition's leader.
const LabelBrokerID = "sharestate.dev/broker-id"

// Event reasons.
const (
	// EventReasonFenced: the operator raised a partition's state epoch to fence its stale leader.
	EventReasonFenced = "Fenced"
	// EventReasonFenceRefused: a stale leader could not be fenced (the state epoch is at its maximum).
	EventReasonFenceRefused = "FenceRefused"
	// EventReasonLeaderChanged: a new leader Read the partition with a higher leader epoch.
	EventReasonLeaderChanged = "LeaderChanged"
	// EventReasonOffsetReset: the operator carried out an offset reset of the group.
	EventReasonOffsetReset = "OffsetReset"
	// EventReasonOffsetResetRefused: the offset reset request cannot be carried out as written.
	EventReasonOffsetResetRefused = "OffsetResetRefused"
	// EventReasonMisnamedPartitionState: SharePartitionStates of the group are under names not derived
	// from their key, and are not adopted.
	EventReasonMisnamedPartitionState = "MisnamedPartitionState"
)
