package sharestate

import (
	"encoding/base64"
	"fmt"
)

// ErrorCode is a Kafka error code (semantics §3), answered per partition.
type ErrorCode int16

// The error codes the persister and the share-partition leader produce.
const (
	ErrNone                      ErrorCode = 0
	ErrUnknownServerError        ErrorCode = -1
	ErrUnknownTopicOrPartition   ErrorCode = 3
	ErrNotLeaderOrFollower       ErrorCode = 6
	ErrCoordinatorLoadInProgress ErrorCode = 14
	ErrCoordinatorNotAvailable   ErrorCode = 15
	ErrNotCoordinator            ErrorCode = 16
	ErrUnsupportedVersion        ErrorCode = 35
	ErrInvalidRequest            ErrorCode = 42
	ErrGroupIDNotFound           ErrorCode = 69
	ErrFencedLeaderEpoch         ErrorCode = 74
	ErrFencedStateEpoch          ErrorCode = 124
)

// Error codes the share-partition leader answers its clients with, beyond those of the persister.
const (
	// ErrLeaderNotAvailable (5): the share-partition is still loading its state; retriable.
	ErrLeaderNotAvailable ErrorCode = 5
	// ErrInvalidRecordState (121): acknowledged records are not acquired by the member.
	ErrInvalidRecordState ErrorCode = 121
)

// String returns Kafka's name of the code.
func (c ErrorCode) String() string {
	switch c {
	case ErrNone:
		return "NONE"
	case ErrUnknownServerError:
		return "UNKNOWN_SERVER_ERROR"
	case ErrUnknownTopicOrPartition:
		return "UNKNOWN_TOPIC_OR_PARTITION"
	case ErrNotLeaderOrFollower:
		return "NOT_LEADER_OR_FOLLOWER"
	case ErrCoordinatorLoadInProgress:
		return "COORDINATOR_LOAD_IN_PROGRESS"
	case ErrCoordinatorNotAvailable:
		return "COORDINATOR_NOT_AVAILABLE"
	case ErrNotCoordinator:
		return "NOT_COORDINATOR"
	case ErrUnsupportedVersion:
		return "UNSUPPORTED_VERSION"
	case ErrInvalidRequest:
		return "INVALID_REQUEST"
	case ErrGroupIDNotFound:
		return "GROUP_ID_NOT_FOUND"
	case ErrFencedLeaderEpoch:
		return "FENCED_LEADER_EPOCH"
	case ErrFencedStateEpoch:
		return "FENCED_STATE_EPOCH"
	case ErrLeaderNotAvailable:
		return "LEADER_NOT_AVAILABLE"
	case ErrInvalidRecordState:
		return "INVALID_RECORD_STATE"
	default:
		return fmt.Sprintf("ErrorCode(%d)", int16(c))
	}
}

// Retriable reports whether Kafka's broker-side client retries the code (semantics §3).
func (c ErrorCode) Retriable() bool {
	return c == ErrCoordinatorLoadInProgress || c == ErrCoordinatorNotAvailable || c == ErrNotCoordinator
}

// TopicID is a Kafka topic id, a 16-byte Uuid. The zero value means "no topic".
type TopicID [16]byte

// String renders the id as Kafka prints it: 22 characters of URL-safe base64 without padding.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// IsZero reports whether the id is the zero Uuid.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// ParseTopicID parses the 22-character form String produces.
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	if len(s) != 22 {
		return id, fmt.Errorf("topic id %q: want 22 characters of URL-safe base64", s)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("topic id %q: not URL-safe base64 of 16 bytes", s)
	}
	copy(id[:], raw)
	return id, nil
}

// MustParseTopicID is ParseTopicID for a topic id known to be valid (a constant, a test's): it
// panics on an invalid one.
func MustParseTopicID(s string) TopicID {
	id, err := ParseTopicID(s)
	if err != nil {
		panic(err)
	}
	return id
}

// Request is one call of an operation: a group and, per topic, the partitions with their inputs.
// P is the per-partition input (InitializePartition, ReadPartition, ...).
type Request[P any] struct {
	GroupID string
	Topics  []TopicData[P]
}

// Response answers a Request with one result per partition, in the request's order. R is the
// per-partition result (PartitionResult, ReadResult, ...).
type Response[R any] struct {
	Topics []TopicData[R]
}

// TopicData is a topic and its partitions' inputs or results.
type TopicData[T any] struct {
	TopicID    TopicID
	Partitions []T
}

// PartitionResult is a partition's answer: its index and an error code with an optional message.
type PartitionResult struct {
	Partition    int32
	ErrorCode    ErrorCode
	ErrorMessage string
}

// InitializePartition is Initialize's input for one partition.
type InitializePartition struct {
	Partition   int32
	StateEpoch  int32
	StartOffset int64
}

// ReadPartition is Read's input for one partition.
type ReadPartition struct {
	Partition   int32
	LeaderEpoch int32
}

// ReadResult is Read's answer for one partition.
type ReadResult struct {
	PartitionResult
	StateEpoch   int32
	StartOffset  int64
	StateBatches []StateBatch
}

// WritePartition is Write's input for one partition. DeliveryCompleteCount is -1 when the caller does
// not know it (Write v0).
type WritePartition struct {
	Partition             int32
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32
	StateBatches          []StateBatch
}

// DeletePartition is Delete's input for one partition.
type DeletePartition struct {
	Partition int32
}

// ReadSummaryPartition is ReadSummary's input for one partition.
type ReadSummaryPartition struct {
	Partition   int32
	LeaderEpoch int32
}

// ReadSummaryResult is ReadSummary's answer for one partition.
type ReadSummaryResult struct {
	PartitionResult
	StateEpoch            int32
	LeaderEpoch           int32
	StartOffset           int64
	DeliveryCompleteCount int32
}

// The requests and responses of the five operations.
type (
	// InitializeRequest asks to create or reset partitions' state.
	InitializeRequest = Request[InitializePartition]
	// InitializeResponse answers an InitializeRequest.
	InitializeResponse = Response[PartitionResult]
	// ReadRequest asks for partitions' state.
	ReadRequest = Request[ReadPartition]
	// ReadResponse answers a ReadRequest.
	ReadResponse = Response[ReadResult]
	// WriteRequest carries new state batches for partitions.
	WriteRequest = Request[WritePartition]
	// WriteResponse answers a WriteRequest.
	WriteResponse = Response[PartitionResult]
	// DeleteRequest asks to remove partitions' state.
	DeleteRequest = Request[DeletePartition]
	// DeleteResponse answers a DeleteRequest.
	DeleteResponse = Response[PartitionResult]
	// ReadSummaryRequest asks for partitions' summaries.
	ReadSummaryRequest = Request[ReadSummaryPartition]
	// ReadSummaryResponse answers a ReadSummaryRequest.
	ReadSummaryResponse = Response[ReadSummaryResult]
)
