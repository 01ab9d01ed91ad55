package kafkawire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// DefaultMaxFrameBytes is Kafka's socket.request.max.bytes (100 MiB): the largest request the sidecar
// reads and the largest response the client reads.
const DefaultMaxFrameBytes = 100 << 20

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
// buffer grows as its bytes arrive, so that a size field alone, which costs a peer four bytes, never
// makes the reader allocate more than about twice what it was actually sent.
const directRead = 64 << 10

// ReadFrame reads one frame of Kafka's framing: a big-endian int32 size, then that many bytes, which
// it returns. A stream that ends between frames returns io.EOF; one that ends inside a frame
// returns io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, maxSize int32) ([]byte, error) {
	var sizeField [4]byte
	if _, err := io.ReadFull(r, sizeField[:]); err != nil {
		return nil, err
	}
	size := int32(binary.BigEndian.Uint32(sizeField[:]))
	if size < 0 || size > maxSize {
		return nil, &FrameSizeError{Size: size, Max: maxSize}
	}
	if size <= directRead {
		frame := make([]byte, size)
		if _, err := io.ReadFull(r, frame); err != nil {
			return nil, unexpected(err)
		}
		return frame, nil
	}
	var buf bytes.Buffer
	buf.Grow(directRead)
	n, err := buf.ReadFrom(io.LimitReader(r, int64(size)))
	if err != nil {
		return nil, unexpected(err)
	}
	if n < int64(size) {
		return nil, io.ErrUnexpectedEOF
	}
	return buf.Bytes(), nil
}

// unexpected turns an EOF inside a frame into io.ErrUnexpectedEOF, so that io.EOF only ever means a
// clean end between frames.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
