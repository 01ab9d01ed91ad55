package kafkawire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxRequestBytes is the largest request the sidecar reads by default: 8 MiB. Kafka's brokers
// take up to socket.request.max.bytes (100 MiB) on any listener; the sidecar only serves the five
// share-state requests, and those are small. A state batch is 20 bytes on the wire (firstOffset int64,
// lastOffset int64, deliveryState int8, deliveryCount int16, a tagged-field byte), and a Write carries
// at most 2000 of them per partition (sharestate.DefaultLimits.MaxBatchesPerWrite, Kafka's default
// in-flight window), about 27 bytes of partition fields besides: 40 KB for a partition's largest Write.
// Kafka's persister combines into one request the writes of a group that queued for a coordinator
// while its previous Write was in flight, with no cap on their number (PersisterStateManager's
// generateRequests: docs/kafka-compatibility.md, "Batching", source S8), so a request may carry many
// partitions: 8 MiB holds over 200 partitions' largest writes at once (over 40 even at the CRD's
// 10000 batches a partition).
// Read, ReadSummary, Initialize and Delete take under 20 bytes a partition: 8 MiB is hundreds of
// thousands of partitions.
//
// A request the sidecar reads costs it a few times its size once decoded (Go structs of the batches,
// then the store's copy), so this bound is also what one connection can make it hold per request.
const DefaultMaxRequestBytes = 8 << 20

// DefaultMaxResponseBytes is the largest response the client reads by default: 100 MiB, Kafka's
// socket.request.max.bytes. Responses are bounded by what the sidecar stores, not by what the client
// sends: a Read of many partitions is answered with every batch each one holds (up to the CRD's
// 10000 a partition, 200 KB), so a Read of a broker's thousands of partitions can be tens of MiB.
// The client trusts its sidecar, which runs in its own pod; the bound only stops a corrupt stream.
const DefaultMaxResponseBytes = 100 << 20

// FrameSizeError is a frame whose size field is negative or above the reader's maximum. The stream
// cannot be resynchronised after it: the connection must be closed.
type FrameSizeError struct {
	Size int32
	Max  int32
}

func (e *FrameSizeError) Error() string {
	if e.Size < 0 {
		return fmt.Sprintf("kafkawire: frame size %d is negative", e.Size)
	}
	return fmt.Sprintf("kafkawire: frame size %d is above the maximum of %d", e.Size, e.Max)
}

// directRead is the largest frame read into a buffer of its announced size at once. A larger frame's
// buffer doubles as its bytes arrive, up to exactly its size, so that a size field alone, which costs
// a peer four bytes, never makes the reader allocate more than directRead before the bytes come: the
// buffers of one frame add up to less than four times the bytes received, and the frame returned
// holds no spare capacity.
const directRead = 64 << 10

// ReadFrame reads one frame of Kafka's framing: a big-endian int32 size, then that many bytes, which
// it returns. A stream that ends between frames returns io.EOF; one that ends inside a frame
// returns io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, maxSize int32) ([]byte, error) {
	var sizeField [4]byte
	if _, err := io.ReadFull(r, sizeField[:]); err != nil {
		return nil, err
	}
	size, err := FrameSize(sizeField, maxSize)
	if err != nil {
		return nil, err
	}
	frame := make([]byte, min(size, directRead))
	if _, err := io.ReadFull(r, frame); err != nil {
		return nil, InFrame(err)
	}
	for len(frame) < size {
		grown := make([]byte, min(2*len(frame), size))
		received := copy(grown, frame) // the old buffer is garbage from here
		if _, err := io.ReadFull(r, grown[received:]); err != nil {
			return nil, InFrame(err)
		}
		frame = grown
	}
	return frame, nil
}

// FrameSize checks a frame's size field against maxSize and returns the size it announces.
func FrameSize(sizeField [4]byte, maxSize int32) (int, error) {
	size := int32(binary.BigEndian.Uint32(sizeField[:]))
	if size < 0 || size > maxSize {
		return 0, &FrameSizeError{Size: size, Max: maxSize}
	}
	return int(size), nil
}

// InFrame turns an EOF inside a frame into io.ErrUnexpectedEOF, so that io.EOF only ever means a
// clean end between frames.
func InFrame(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
