package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxStateBatches bounds status.stateBatches: Kafka's largest in-flight window
// (group.share.partition.max.record.locks, at most 10000) cannot need more batches than records.
const MaxStateBatches = 10000

// SharePartitionStateSpec names the share-partition whose state the object holds. It is set when the
// object is created and never changes.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.topicName) || has(self.topicName)",message="topicName is immutable once set",fieldPath=".topicName"
type SharePartitionStateSpec struct {
	// groupId is the Kafka share group id.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="groupId is immutable"
	GroupID GroupID `json:"groupId"`

	// topicId is the Kafka topic id of the partition.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="topicId is immutable"
	TopicID TopicID `json:"topicId"`

	// topicName is the topic's name, for people: Kafka keys share state by topicId alone.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=249
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]+$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="topicName is immutable once set"
	TopicName string `json:"topicName,omitempty"`

	// partition is the topic partition's index, below 1000000 (MaxPartitions): a ShareGroup declares at
	// most 1000000 partitions a topic, and the state of a partition no group could declare would be
	// kept with nothing to reach it.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=999999
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="partition is immutable"
	Partition int32 `json:"partition"`
}

// The schema bounds the string and its shape; the grammar is sharestate.ParseBatch's alone (numbers
// without leading zeros, offsets of an int64 with the last above the first, a state that is stored, a
// count of an int16), as is the rule that the batches are sorted and do not overlap, which no per-item
// rule can check. Every reader and writer of the state decodes with it: the persister answers a state
// it cannot decode UNKNOWN_SERVER_ERROR and `kubectl sharestate describe` names the batch and what is
// wrong with it (docs/semantics.md, section 9). The pattern accepts every batch ParseBatch accepts (a
// test offers both the codec's batches at their edges).

// StateBatch is one run of offsets with one delivery state and count, stored as the compact string
// "<firstOffset>[-<lastOffset>]/<deliveryState>/<deliveryCount>" (the last offset is left out when it
// equals the first). deliveryState is Kafka's byte: 0 AVAILABLE, 2 ACKNOWLEDGED, 3 ARCHIVING,
// 4 ARCHIVED; 1 ACQUIRED is never stored. Example: "1000-1009/2/1" is offsets 1000 to 1009
// acknowledged after one delivery.
// +kubebuilder:validation:MaxLength=47
// +kubebuilder:validation:Pattern=`^[0-9]{1,19}(-[0-9]{1,19})?/[0-9]/[0-9]{1,5}$`
type StateBatch string

// LeaderRef identifies the share-partition leader that last Read or wrote the state: the broker and
// its pod, so the operator can fence the state when that pod is gone.
type LeaderRef struct {
	// brokerId is the Kafka broker id (node id) of the leader.
	// +required
	// +kubebuilder:validation:Minimum=0
	BrokerID int32 `json:"brokerId"`

	// podName is the name of the leader's broker pod, in the object's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PodName string `json:"podName,omitempty"`

	// podUID is the UID of the leader's broker pod: a pod recreated under the same name is another leader.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	PodUID string `json:"podUID,omitempty"`

	// leaderEpoch is the partition leader epoch the leader holds.
	// +required
	// +kubebuilder:validation:Minimum=0
	LeaderEpoch int32 `json:"leaderEpoch"`

	// since is when this leader first Read or wrote the state.
	// +optional
	Since metav1.Time `json:"since,omitempty"`
}

// Where the transition rules sit: on the field they guard (`self >= oldSelf` on an epoch, `self ==
// oldSelf` on a spec field), or on the nearest object that holds every field a rule reads, never on the
// whole object. The API server evaluates every rule on every status update, and each field a rule
// reads from an object makes it copy the schema of every field of that object (k8s.io/apiextensions-
// apiserver v0.37.2, pkg/apiserver/schema/cel/model/adaptor.go, Structural.Properties; it is called
// more than once per field read, from k8s.io/apiserver v0.37.2, pkg/cel/common/valuesunstructured.go,
// unstructuredMap.Find). The epoch and start-offset rules on the whole object read their fields through
// the object and its status, and made a quarter of what the API server allocated per status write
// (test/bench, scenario validation-cost). The defaults keep the guarded fields present, so that a patch
// deleting one meets its rule as a 0 (or a -1) instead of escaping it; the rule on the whole object
// keeps the status itself from being deleted, which a status update without one would do.

// SharePartitionStateStatus is the persisted share-partition state (semantics §5) and what the operator
// observed of it. The persister writes the state fields; the operator writes conditions and raises
// stateEpoch to fence a stale leader.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.createTime) || self.startOffset >= oldSelf.startOffset || self.stateEpoch > oldSelf.stateEpoch || self.initializeCount > oldSelf.initializeCount",message="status.startOffset of an initialized state may be lowered only by a reset: together with a higher status.stateEpoch or a higher status.initializeCount",fieldPath=".startOffset"
type SharePartitionStateStatus struct {
	// stateEpoch is the version of the state. Only Initialize and the operator's fencing raise it; a
	// writer holding an older one is answered FENCED_STATE_EPOCH. It never goes down.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="status.stateEpoch may not be lowered"
	StateEpoch int32 `json:"stateEpoch"`

	// leaderEpoch is the highest partition leader epoch that has Read the state. A caller with a lower
	// one is answered FENCED_LEADER_EPOCH. It never goes down: a reset (Initialize at an equal or
	// higher stateEpoch) keeps it, so a leader fenced before the reset stays fenced after it.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="status.leaderEpoch may not be lowered"
	LeaderEpoch int32 `json:"leaderEpoch"`

	// startOffset is the first offset still tracked; every offset below it is done. -1 means not set
	// yet (the leader applies share.auto.offset.reset). Once the state is initialized (createTime is
	// set) it goes down only through a reset, with a higher stateEpoch or initializeCount; before
	// that it means nothing.
	// +optional
	// +kubebuilder:default=-1
	// +kubebuilder:validation:Minimum=-1
	StartOffset int64 `json:"startOffset"`

	// deliveryCompleteCount is the number of offsets at or above startOffset whose delivery is
	// complete (acknowledged or archived); -1 when unknown.
	// +optional
	// +kubebuilder:validation:Minimum=-1
	DeliveryCompleteCount int32 `json:"deliveryCompleteCount"`

	// initializeCount counts the fresh states Initialize has written into this object. Kafka's share
	// coordinator re-initializes a state at an equal state epoch (an offset reset while the group's
	// epoch has not moved), and the raised count is what lets such a reset lower startOffset. It
	// never goes down.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= oldSelf",message="status.initializeCount may not be lowered"
	InitializeCount int64 `json:"initializeCount"`

	// stateBatches are the in-flight records' states above startOffset, sorted by first offset and
	// non-overlapping. Offsets no batch covers have not been delivered yet.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10000
	StateBatches []StateBatch `json:"stateBatches,omitempty"`

	// inFlightRecords is the number of offsets the stateBatches cover whose delivery is not complete
	// (neither acknowledged nor archived). The persister sets it with every state it writes, so that a
	// reader that needs only the figure (the operator's group totals, kubectl) need not decode the
	// batches. Unset on a state written before the persister kept it: count the batches then.
	// +optional
	// +kubebuilder:validation:Minimum=0
	InFlightRecords *int64 `json:"inFlightRecords,omitempty"`

	// leader is the share-partition leader that last Read or wrote the state; unset once fenced.
	// +optional
	Leader *LeaderRef `json:"leader,omitempty"`

	// fencedLeader is the last leader the operator fenced because its pod is gone (deleted,
	// terminating, finished or replaced). A Read or Write from that same pod (same podUID) at a leader
	// epoch not above fencedLeader.leaderEpoch is answered FENCED_LEADER_EPOCH, so a terminating broker
	// cannot take the partition back by reading it again.
	// +optional
	FencedLeader *LeaderRef `json:"fencedLeader,omitempty"`

	// createTime is when the state was (re)initialized.
	// +optional
	CreateTime *metav1.Time `json:"createTime,omitempty"`

	// writeTime is when the state was last written.
	// +optional
	WriteTime *metav1.Time `json:"writeTime,omitempty"`

	// writeCount counts the Writes applied since the state was (re)initialized (several Writes that
	// arrive together may share one status update).
	// +optional
	// +kubebuilder:validation:Minimum=0
	WriteCount int64 `json:"writeCount,omitempty"`

	// lastWriteId is a random token the persister sets on every status update it makes. A persister
	// that lost the answer to an update reads the object again and finds its token there if, and only
	// if, its update was the last one applied.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	LastWriteID string `json:"lastWriteId,omitempty"`

	// conditions are the operator's observations: Initialized and Fenced.
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

// SharePartitionState holds the Kafka share-group state of one (group, topic, partition): its epochs,
// start offset and in-flight record states, and the leader that holds it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sps,categories=sharestate
// +kubebuilder:selectablefield:JSONPath=`.spec.groupId`
// +kubebuilder:printcolumn:name="Group",type=string,JSONPath=`.spec.groupId`
// +kubebuilder:printcolumn:name="Topic",type=string,JSONPath=`.spec.topicName`
// +kubebuilder:printcolumn:name="Topic ID",type=string,JSONPath=`.spec.topicId`,priority=1
// +kubebuilder:printcolumn:name="Partition",type=integer,JSONPath=`.spec.partition`
// +kubebuilder:printcolumn:name="State Epoch",type=integer,JSONPath=`.status.stateEpoch`
// +kubebuilder:printcolumn:name="Leader Epoch",type=integer,JSONPath=`.status.leaderEpoch`
// +kubebuilder:printcolumn:name="Start Offset",type=integer,JSONPath=`.status.startOffset`
// +kubebuilder:printcolumn:name="In Flight",type=integer,JSONPath=`.status.inFlightRecords`,priority=1
// +kubebuilder:printcolumn:name="Leader",type=string,JSONPath=`.status.leader.podName`
// +kubebuilder:printcolumn:name="Broker",type=integer,JSONPath=`.status.leader.brokerId`
// +kubebuilder:printcolumn:name="Fenced",type=string,JSONPath=`.status.conditions[?(@.type=="Fenced")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.status) || has(self.status)",message="status may not be removed: it holds the epochs",fieldPath=".status"
type SharePartitionState struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the share-partition.
	// +required
	Spec SharePartitionStateSpec `json:"spec"`

	// status holds the share-partition's state.
	// +optional
	Status SharePartitionStateStatus `json:"status,omitempty"`
}

// SharePartitionStateList is a list of SharePartitionState.
// +kubebuilder:object:root=true
type SharePartitionStateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SharePartitionState `json:"items"`
}
