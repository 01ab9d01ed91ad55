package v1alpha1

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
