package v1alpha1

// MaxPartitions bounds a topic's partition count in a ShareGroup's spec.topics, and so every
// partition index (a SharePartitionState's spec.partition, an offset reset's partitions) to
// MaxPartitions-1: one bound for both, so that no state can be stored for a partition that no group
// could declare. controller-gen reads no Go constants: the markers repeat the numbers, and a test of
// the generated schemas holds them to this one.
const MaxPartitions = 1000000

// TopicID is a Kafka topic id: a 16-byte Uuid written as 22 characters of URL-safe base64 without
// padding, as Kafka prints it. The last character carries only two bits of the Uuid, so it is one of
// A, Q, g or w. The zero Uuid means "no topic" in Kafka and is refused.
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_-]{21}[AQgw]$`
// +kubebuilder:validation:XValidation:rule="self != 'AAAAAAAAAAAAAAAAAAAAAA'",message="topicId must not be the zero Uuid"
type TopicID string

// GroupID is a Kafka share group id: any non-empty string of at most 255 characters (Kafka's own
// limit on group ids), unicode, dots and upper case included.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=255
type GroupID string
