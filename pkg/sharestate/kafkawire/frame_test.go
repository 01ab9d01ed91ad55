package kafkawire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
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

// allocatedBy returns the bytes of heap that f allocates, counting garbage too. The process's total
// also counts what other goroutines allocate meanwhile (those a previous test left winding down, say),
// which only ever adds: so f runs a few times, and the least is taken.
func allocatedBy(f func()) uint64 {
	least := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// A size field claims a large frame and only some of its bytes follow: the reader allocates in
// proportion to the bytes that came (under four times them, plus the first directRead), never the
// claim.
func TestReadFrameDoesNotAllocateWhatTheSizeClaims(t *testing.T) {
	cases := []struct {
		name  string
		claim int32
		sent  int
	}{
		{"the largest size field, four bytes", math.MaxInt32, 4},
		{"the default request limit, four bytes", DefaultMaxRequestBytes, 4},
		{"the default response limit, 1 MiB", DefaultMaxResponseBytes, 1 << 20},
		{"8 MiB, all but one byte", 8 << 20, 8<<20 - 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			input := append(binary.BigEndian.AppendUint32(nil, uint32(tc.claim)), make([]byte, tc.sent)...)
			const reads = 5
			allocated := allocatedBy(func() {
				for range reads {
					if _, err := ReadFrame(bytes.NewReader(input), tc.claim); !errors.Is(err, io.ErrUnexpectedEOF) {
						t.Fatalf("error %v, want io.ErrUnexpectedEOF", err)
					}
				}
			})
			if limit := uint64(reads * (4*tc.sent + directRead + 1024)); allocated > limit {
				t.Fatalf("%d reads of %d bytes of a frame claiming %d allocated %d bytes, over %d", reads, tc.sent, tc.claim, allocated, limit)
			}
		})
	}
}

// trickle is a reader that hands out at most n bytes a call, as a socket does.
type trickle struct {
	r io.Reader
	n int
}

func (t *trickle) Read(p []byte) (int, error) { return t.r.Read(p[:min(len(p), t.n)]) }

// A large frame that is allowed arrives in small reads: reading it allocates under four times its
// size in all, and the frame returned holds no spare capacity.
func TestReadFrameAllocatesInProportionToTheFrame(t *testing.T) {
	for _, size := range []int{directRead + 1, 3*directRead + 5, DefaultMaxRequestBytes} {
		payload := bytes.Repeat([]byte{7}, size)
		input := framed(payload)
		var frame []byte
		allocated := allocatedBy(func() {
			var err error
			if frame, err = ReadFrame(&trickle{r: bytes.NewReader(input), n: 4096}, int32(size)); err != nil {
				t.Fatal(err)
			}
		})
		if !bytes.Equal(frame, payload) {
			t.Fatalf("a frame of %d bytes read back as %d different bytes", size, len(frame))
		}
		if cap(frame) != size {
			t.Fatalf("a frame of %d bytes holds %d", size, cap(frame))
		}
		if limit := uint64(4*size + 1024); allocated > limit {
			t.Fatalf("reading a frame of %d bytes allocated %d bytes, over %d", size, allocated, limit)
		}
	}
}

// FuzzReadFrame: whatever the bytes, ReadFrame neither panics nor returns a frame other than the
// one the size field announces, nor holds memory out of proportion to what it was given.
func FuzzReadFrame(f *testing.F) {
	f.Add(framed([]byte("hello")), int32(100))
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1}, int32(DefaultMaxResponseBytes))
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
