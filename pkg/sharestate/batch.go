package sharestate

import "fmt"

// DeliveryState is the delivery state of a record, as Kafka encodes it on the wire (an int8).
type DeliveryState int8

// The delivery states of semantics §1. Acquired lives in the share-partition leader's memory only and is
// never persisted; Archiving exists only with dead-letter queues (Kafka 4.3+).
const (
	DeliveryStateAvailable    DeliveryState = 0
	DeliveryStateAcquired     DeliveryState = 1
	DeliveryStateAcknowledged DeliveryState = 2
	DeliveryStateArchiving    DeliveryState = 3
	DeliveryStateArchived     DeliveryState = 4
)

// Persistable reports whether a batch in this state may be stored (semantics §4: {0, 2, 3, 4}).
func (s DeliveryState) Persistable() bool {
	switch s {
	case DeliveryStateAvailable, DeliveryStateAcknowledged, DeliveryStateArchiving, DeliveryStateArchived:
		return true
	default:
		return false
	}
}

// String returns Kafka's name of the state.
func (s DeliveryState) String() string {
	switch s {
	case DeliveryStateAvailable:
		return "AVAILABLE"
	case DeliveryStateAcquired:
		return "ACQUIRED"
	case DeliveryStateAcknowledged:
		return "ACKNOWLEDGED"
	case DeliveryStateArchiving:
		return "ARCHIVING"
	case DeliveryStateArchived:
		return "ARCHIVED"
	default:
		return fmt.Sprintf("DeliveryState(%d)", int8(s))
	}
}

// StateBatch is a run of offsets [FirstOffset, LastOffset] (inclusive) that share one delivery state
// and one delivery count.
type StateBatch struct {
	FirstOffset   int64
	LastOffset    int64
	DeliveryState DeliveryState
	DeliveryCount int16
}

// Validate checks one batch against semantics §4's input rules: offsets non-negative, lastOffset not
// below firstOffset, a persistable delivery state and a non-negative delivery count.
func (b StateBatch) Validate() error {
	switch {
	case b.FirstOffset < 0:
		return fmt.Errorf("batch %v: negative first offset", b)
	case b.LastOffset < b.FirstOffset:
		return fmt.Errorf("batch %v: last offset below first offset", b)
	case !b.DeliveryState.Persistable():
		return fmt.Errorf("batch %v: delivery state %d cannot be stored", b, int8(b.DeliveryState))
	case b.DeliveryCount < 0:
		return fmt.Errorf("batch %v: negative delivery count", b)
	}
	return nil
}

// String renders the batch in its storage form (see FormatBatch).
func (b StateBatch) String() string { return FormatBatch(b) }
