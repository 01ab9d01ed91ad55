package serve

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// tcpPair is two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accepting failed")
	}
	t.Cleanup(func() { _ = client.Close(); _ = server.Close() })
	return client, server
}

// readAll reads n bytes from c on a goroutine of its own, so that the writer never waits for a
// reader.
func readAll(c net.Conn, n int) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		_, _ = io.ReadFull(c, b)
		got <- b
	}()
	return got
}

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// TestSpliceFrameMovesLargeFrames: between TCP connections, a large frame arrives whole after what
// the downstream's buffer held, and the kernel takes exactly the frame from the upstream: the next
// frame stays in the socket, where copying through the buffers would have read it too.
func TestSpliceFrameMovesLargeFrames(t *testing.T) {
	upWriter, upConn := tcpPair(t)
	downConn, downReader := tcpPair(t)
	frame, next := pattern(3<<20+5), []byte("the next frame")
	go func() { _, _ = upWriter.Write(append(append([]byte{}, frame...), next...)) }()

	src := bufio.NewReaderSize(upConn, 64<<10)
	if _, err := src.Peek(8); err != nil { // as the writer peeks a response's header
		t.Fatal(err)
	}
	dst := bufio.NewWriterSize(downConn, 64<<10)
	before := []byte("an earlier response")
	_, _ = dst.Write(before)
	got := readAll(downReader, len(before)+len(frame))

	n, err := spliceFrame(dst, downConn, src, upConn, int64(len(frame)), time.Minute)
	if err != nil || n != int64(len(frame)) {
		t.Fatalf("moved %d bytes, %v; want %d", n, err, len(frame))
	}
	if err := dst.Flush(); err != nil { // as the writer does before it waits
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, append(before, frame...)) {
		t.Fatal("the downstream received other bytes than the earlier response and the frame")
	}
	if held := src.Buffered(); held != 0 {
		t.Fatalf("the upstream's buffer holds %d bytes beyond the frame: it went through the buffers", held)
	}
	rest := make([]byte, len(next))
	if _, err := io.ReadFull(src, rest); err != nil || !bytes.Equal(rest, next) {
		t.Fatalf("the next frame read %q, %v", rest, err)
	}
}

// TestSpliceFrameUpstreamEndsMidFrame: an upstream that closes mid-frame fails the copy.
func TestSpliceFrameUpstreamEndsMidFrame(t *testing.T) {
	upWriter, upConn := tcpPair(t)
	downConn, downReader := tcpPair(t)
	go func() {
		_, _ = upWriter.Write(pattern(200 << 10))
		_ = upWriter.Close()
	}()
	go func() { _, _ = io.Copy(io.Discard, downReader) }()
	src, dst := bufio.NewReaderSize(upConn, 64<<10), bufio.NewWriterSize(downConn, 64<<10)
	n, err := spliceFrame(dst, downConn, src, upConn, 1<<20, time.Minute)
	if !errors.Is(err, io.ErrUnexpectedEOF) || n != 200<<10 {
		t.Fatalf("moved %d bytes, %v; want %d and io.ErrUnexpectedEOF", n, err, 200<<10)
	}
}

// TestSpliceFrameThroughBuffersWithoutTCP: connections that are not TCP (TLS, say) get the
// buffers' copy.
func TestSpliceFrameThroughBuffersWithoutTCP(t *testing.T) {
	upWriter, upConn := net.Pipe()
	downConn, downReader := net.Pipe()
	t.Cleanup(func() { _ = upWriter.Close(); _ = upConn.Close(); _ = downConn.Close(); _ = downReader.Close() })
	frame := pattern(300 << 10)
	go func() { _, _ = upWriter.Write(frame) }()
	got := readAll(downReader, len(frame))
	src, dst := bufio.NewReaderSize(upConn, 64<<10), bufio.NewWriterSize(downConn, 64<<10)
	if n, err := spliceFrame(dst, downConn, src, upConn, int64(len(frame)), time.Minute); err != nil || n != int64(len(frame)) {
		t.Fatalf("copied %d bytes, %v", n, err)
	}
	if err := dst.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(<-got, frame) {
		t.Fatal("the frame arrived changed")
	}
}
