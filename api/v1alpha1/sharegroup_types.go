package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ShareGroupTopic declares a topic the group consumes. Declared topics bound which share-partitions
// exist: a partition at or above partitions is unknown (UNKNOWN_TOPIC_OR_PARTITION).
type ShareGroupTopic struct {
	// topicId is the Kafka topic id.
	// +required
	TopicID TopicID `json:"topicId"`

	// name is the topic's name, for people.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	Name string `json:"name,omitempty"`

	// partitions is the topic's partition count, at most 1000000 (MaxPartitions).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Partitions int32 `json:"partitions"`
}

// AutoOffsetReset is Kafka's share.auto.offset.reset: where a share-partition with no start offset
// begins: "earliest", "latest", or "by_duration:<ISO-8601 duration>" (e.g. "by_duration:PT1H").
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:Pattern=`^(earliest|latest|by_duration:-?P[0-9DTHMS.]+)$`
type AutoOffsetReset string

// The plain values of AutoOffsetReset.
const (
	AutoOffsetResetEarliest AutoOffsetReset = "earliest"
	AutoOffsetResetLatest   AutoOffsetReset = "latest"
)

// ShareGroupSettings are the group's share settings, shown in one place. The brokers own them in
// Kafka; here they document the intent and bound what the persister accepts.
type ShareGroupSettings struct {
	// deliveryCountLimit is share.delivery.count.limit: after this many deliveries a record is archived.
	// +optional
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=10
	DeliveryCountLimit *int32 `json:"deliveryCountLimit,omitempty"`

	// recordLockDurationMs is share.record.lock.duration.ms: how long a consumer holds an acquired record.
	// +optional
	// +kubebuilder:validation:Minimum=1000
	// +kubebuilder:validation:Maximum=3600000
	RecordLockDurationMs *int32 `json:"recordLockDurationMs,omitempty"`

	// maxRecordLocks is share.partition.max.record.locks: the in-flight window per partition. It bounds
	// the state batches one write may carry.
	// +optional
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=10000
	MaxRecordLocks *int32 `json:"maxRecordLocks,omitempty"`

	// autoOffsetReset is share.auto.offset.reset.
	// +optional
	AutoOffsetReset AutoOffsetReset `json:"autoOffsetReset,omitempty"`
}

// OffsetResetTarget says where an offset reset moves a partition's start offset.
// +kubebuilder:validation:Enum=Earliest;Offset;AutoOffsetReset
type OffsetResetTarget string

const (
	// OffsetResetToEarliest sets the start offset to 0; the leader moves it up to the log start offset.
	OffsetResetToEarliest OffsetResetTarget = "Earliest"
	// OffsetResetToOffset sets the start offset to the request's offset.
	OffsetResetToOffset OffsetResetTarget = "Offset"
	// OffsetResetToAutoOffsetReset clears the start offset (-1); the leader applies share.auto.offset.reset.
	OffsetResetToAutoOffsetReset OffsetResetTarget = "AutoOffsetReset"
)

// OffsetResetTopic is what one topic of a reset request resets to.
// +kubebuilder:validation:XValidation:rule="self.to == 'Offset' ? has(self.offset) : !has(self.offset)",message="offset is required with to: Offset and not allowed otherwise",fieldPath=".offset"
type OffsetResetTopic struct {
	// topicId is the topic to reset; the group must declare it.
	// +required
	TopicID TopicID `json:"topicId"`

	// to says where the start offset goes.
	// +required
	To OffsetResetTarget `json:"to"`

	// offset is the new start offset, with to: Offset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Offset *int64 `json:"offset,omitempty"`

	// partitions limits the reset to these partitions; empty means every declared partition.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	// +kubebuilder:validation:items:Minimum=0
	// +kubebuilder:validation:items:Maximum=999999
	Partitions []int32 `json:"partitions,omitempty"`
}

// OffsetResetRequest asks the operator to reset the group's start offsets (Kafka's
// AlterShareGroupOffsets): it raises the group's state epoch and re-initializes every named partition
// at it, which fences every live leader. Each request runs once: the operator records the id it handled.
type OffsetResetRequest struct {
	// id names the request; a new id is a new request, the same id again is the same request.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$`
	ID string `json:"id"`

	// topics are the topics to reset and where to.
	// +required
	// +listType=map
	// +listMapKey=topicId
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Topics []OffsetResetTopic `json:"topics"`
}

// ShareGroupSpec declares a Kafka share group.
type ShareGroupSpec struct {
	// groupId is the Kafka share group id.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="groupId is immutable"
	GroupID GroupID `json:"groupId"`

	// topics declares the group's topics and their partition counts. When empty, any partition is known.
	// +optional
	// +listType=map
	// +listMapKey=topicId
	// +kubebuilder:validation:MaxItems=1000
	Topics []ShareGroupTopic `json:"topics,omitempty"`

	// settings are the group's share settings.
	// +optional
	Settings *ShareGroupSettings `json:"settings,omitempty"`

	// offsetReset is an admin request to reset the group's start offsets.
	// +optional
	OffsetReset *OffsetResetRequest `json:"offsetReset,omitempty"`
}

// OffsetResetStatus records the last reset request the operator handled.
type OffsetResetStatus struct {
	// id is the handled request's id.
	// +required
	// +kubebuilder:validation:MaxLength=63
	ID string `json:"id"`

	// stateEpoch is the state epoch the reset initializes the partitions at, chosen (and recorded)
	// before any partition is touched, so a retried reset uses the same one.
	// +optional
	// +kubebuilder:validation:Minimum=0
	StateEpoch int32 `json:"stateEpoch,omitempty"`

	// startTime is when the operator started the reset; a partition whose state was created before it
	// was not reset by it.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// partitions is the number of partitions the reset initialized.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Partitions int32 `json:"partitions,omitempty"`

	// completionTime is when the reset finished; unset while it is in progress.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// ShareGroupStatus aggregates the group's share-partitions. Its counts are always present, 0 included
// (a default, and no omitempty): kubectl get shows a 0 as 0 where an absent field would leave its column
// blank, and a merge patch of a status in which a count stays 0 would never add a missing one.
type ShareGroupStatus struct {
	// stateEpoch is the highest state epoch of the group's partitions.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="status.stateEpoch may not be lowered"
	StateEpoch int32 `json:"stateEpoch"`

	// partitions is the number of the group's SharePartitionStates.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	Partitions int32 `json:"partitions"`

	// initializedPartitions counts the partitions whose state is initialized.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	InitializedPartitions int32 `json:"initializedPartitions"`

	// fencedPartitions counts the partitions fenced and not yet taken by a new leader.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	FencedPartitions int32 `json:"fencedPartitions"`

	// partitionsWithLeader counts the partitions that have a recorded leader.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	PartitionsWithLeader int32 `json:"partitionsWithLeader"`

	// inFlightRecords sums, over the partitions, the offsets the state batches cover that are not complete.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	InFlightRecords int64 `json:"inFlightRecords"`

	// deliveryCompleteRecords sums the partitions' known deliveryCompleteCount.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	DeliveryCompleteRecords int64 `json:"deliveryCompleteRecords"`

	// lastOffsetReset is the last offset reset request handled.
	// +optional
	LastOffsetReset *OffsetResetStatus `json:"lastOffsetReset,omitempty"`

	// conditions are Ready, Fenced, OffsetReset and MisnamedPartitionStates.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation the operator last acted on.
	// +optional
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// ShareGroup declares a Kafka share group: its topics, settings and offset resets, and shows the state
// of its share-partitions at a glance. It owns the group's SharePartitionStates.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sg,categories=sharestate
// +kubebuilder:selectablefield:JSONPath=`.spec.groupId`
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.groupId`
// +kubebuilder:printcolumn:name="Partitions",type=integer,JSONPath=`.status.partitions`
// +kubebuilder:printcolumn:name="Fenced",type=integer,JSONPath=`.status.fencedPartitions`
// +kubebuilder:printcolumn:name="State Epoch",type=integer,JSONPath=`.status.stateEpoch`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || has(self.status)",message="status may not be removed: it holds the state epoch",fieldPath=".status"
type ShareGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the group.
	// +required
	Spec ShareGroupSpec `json:"spec"`

	// status aggregates the group's share-partitions.
	// +optional
	Status ShareGroupStatus `json:"status,omitempty"`
}

// ShareGroupList is a list of ShareGroup.
// +kubebuilder:object:root=true
type ShareGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ShareGroup `json:"items"`
}
