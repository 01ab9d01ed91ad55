package serve

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// countingWriter counts the writes that reach it: the system calls a socket would make.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// ReadFrom makes countingWriter an io.ReaderFrom, as a *net.TCPConn is: the path io.CopyN takes.
func (w *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	var n int64
	buf := make([]byte, 4096)
	for {
		m, err := r.Read(buf)
		if m > 0 {
			_, _ = w.Write(buf[:m])
			n += int64(m)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// TestCopyFrameGathersSmallFrames: pipelined small frames copied one after another leave in one
// write at the flush; a frame larger than the buffers still arrives whole, in pieces.
func TestCopyFrameGathersSmallFrames(t *testing.T) {
	small := strings.Repeat("a", 100)
	large := strings.Repeat("b", 10000)
	src := bufio.NewReaderSize(strings.NewReader(small+small+small+large), 1024)
	out := &countingWriter{}
	dst := bufio.NewWriterSize(out, 1024)
	for range 3 {
		if n, err := copyFrame(dst, src, int64(len(small))); err != nil || n != int64(len(small)) {
			t.Fatalf("copied %d bytes, %v", n, err)
		}
	}
	if err := dst.Flush(); err != nil {
		t.Fatal(err)
	}
	if out.writes != 1 || out.String() != small+small+small {
		t.Fatalf("three small frames in %d writes (want 1): %q", out.writes, out.String())
	}
	out.Reset()
	if n, err := copyFrame(dst, src, int64(len(large))); err != nil || n != int64(len(large)) {
		t.Fatalf("copied %d bytes of the large frame, %v", n, err)
	}
	if err := dst.Flush(); err != nil {
		t.Fatal(err)
	}
	if out.String() != large {
		t.Fatalf("the large frame arrived as %d bytes", out.Len())
	}
	if n, err := copyFrame(dst, src, 1); !errors.Is(err, io.ErrUnexpectedEOF) || n != 0 {
		t.Fatalf("copying past the end: %d bytes, %v; want io.ErrUnexpectedEOF", n, err)
	}
}
