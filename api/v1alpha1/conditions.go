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
	// ConditionReady is True when every share-partition of the group is initialized and none is fenced.
	ConditionReady = "Ready"
	// ConditionOffsetReset reports the last offset reset request: True when done, False when refused.
	ConditionOffsetReset = "OffsetReset"
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
	// ReasonLeaderAlive: the recorded leader's pod is alive, or no leader is recorded yet.
	ReasonLeaderAlive = "LeaderAlive"
	// ReasonOffsetReset: an admin offset reset raised the state epoch.
	ReasonOffsetReset = "OffsetReset"
	// ReasonAllPartitionsReady: every partition is initialized and none is fenced.
	ReasonAllPartitionsReady = "AllPartitionsReady"
	// ReasonPartitionsFenced: some partitions are fenced.
	ReasonPartitionsFenced = "PartitionsFenced"
	// ReasonPartitionsNotInitialized: some partitions are not initialized.
	ReasonPartitionsNotInitialized = "PartitionsNotInitialized"
	// ReasonResetCompleted: the offset reset request was carried out.
	ReasonResetCompleted = "ResetCompleted"
	// ReasonResetUndeclaredTopic: the offset reset names a topic the group does not declare.
	ReasonResetUndeclaredTopic = "ResetUndeclaredTopic"
)

// LabelShareGroup is set on every SharePartitionState to its ShareGroup's name, so a group's
// partitions can be listed by label.
const LabelShareGroup = "sharestate.dev/share-group"
