package kafkawire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

func framed(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

func TestReadFrame(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 3*directRead+5) // grown as it arrives, not read at once
	cases := []struct {
		name  string
		input []byte
		max   int32
		want  []byte
		err   error // errors.Is target; nil for success
		size  bool  // a FrameSizeError
	}{
		{name: "a frame", input: framed([]byte("hello")), max: 10, want: []byte("hello")},
		{name: "an empty frame", input: framed(nil), max: 10, want: []byte{}},
		{name: "exactly the maximum", input: framed([]byte("0123456789")), max: 10, want: []byte("0123456789")},
		{name: "a large frame", input: framed(big), max: 1 << 20, want: big},
		{name: "nothing: a clean end", input: nil, max: 10, err: io.EOF},
		{name: "half a size field", input: []byte{0, 0}, max: 10, err: io.ErrUnexpectedEOF},
		{name: "a short frame", input: framed([]byte("hello"))[:7], max: 10, err: io.ErrUnexpectedEOF},
		{name: "a short large frame", input: framed(big)[:directRead*2], max: 1 << 20, err: io.ErrUnexpectedEOF},
		{name: "above the maximum", input: framed([]byte("01234567890")), max: 10, size: true},
		{name: "a negative size", input: []byte{0x80, 0, 0, 0}, max: 10, size: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFrame(bytes.NewReader(tc.input), tc.max)
			var sizeErr *FrameSizeError
			switch {
			case tc.size:
				if !errors.As(err, &sizeErr) {
					t.Fatalf("error %v, want a FrameSizeError", err)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Fatalf("error %v, want %v", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case !bytes.Equal(got, tc.want):
				t.Fatalf("got %d bytes, want %d", len(got), len(tc.want))
			}
		})
	}
}

// A size field claims 100 MiB and four bytes follow: the reader must not allocate the claim.
func TestReadFrameDoesNotAllocateWhatTheSizeClaims(t *testing.T) {
	input := append(binary.BigEndian.AppendUint32(nil, DefaultMaxFrameBytes), 1, 2, 3, 4)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := ReadFrame(bytes.NewReader(input), DefaultMaxFrameBytes); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("error %v", err)
		}
	}
	runtime.ReadMemStats(&after)
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > 10<<20 {
		t.Fatalf("10 reads of a 4-byte frame claiming 100 MiB allocated %d bytes", allocated)
	}
}

// FuzzReadFrame: whatever the bytes, ReadFrame neither panics nor returns a frame other than the
// one the size field announces, nor holds memory out of proportion to what it was given.
func FuzzReadFrame(f *testing.F) {
	f.Add(framed([]byte("hello")), int32(100))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1}, int32(DefaultMaxFrameBytes))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, int32(10))
	f.Fuzz(func(t *testing.T, input []byte, maxSize int32) {
		frame, err := ReadFrame(bytes.NewReader(input), maxSize)
		if err != nil {
			return
		}
		size := int32(binary.BigEndian.Uint32(input))
		if int32(len(frame)) != size || size > maxSize || !bytes.Equal(frame, input[4:4+size]) {
			t.Fatalf("frame of %d bytes from a size field of %d (max %d)", len(frame), size, maxSize)
		}
		if cap(frame) > 2*len(frame)+2*directRead {
			t.Fatalf("a frame of %d bytes holds %d", len(frame), cap(frame))
		}
	})
}
