package serve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"time"
)

// Large responses, Fetch responses above all (a consumer's, and the followers' replication in proxy
// mode), are moved from the upstream's socket to the downstream's by the kernel: splice(2), through
// TCPConn.ReadFrom, without being copied into this process and out again. Through the buffers, each
// of their 64 KiB pieces costs a read and a write and two copies: fetching 300,000 1 KiB records from
// three real brokers cost the proxies 0.37-0.42 s of CPU that way, 0.24-0.25 s with the kernel
// moving them (HAProxy in TCP mode: 0.29-0.30 s).

// spliceMin is the smallest frame the kernel moves: one larger than the upstream's buffer, which
// cannot be held whole anyway. Smaller ones go through the buffers, where pipelined frames gather
// into one write.
const spliceMin = 64 << 10

// spliceChunk is how much the kernel moves under one write deadline: a downstream that stops
// reading mid-frame gets the idle timeout to resume, as it does between the buffers' writes. It is
// what Go moves in one splice call at most.
const spliceChunk = 1 << 20

// copyResponse copies the upstream's response frame of n bytes, size field included, downstream.
func (c *proxyConn) copyResponse(n int64) (int64, error) {
	return spliceFrame(c.downW, c.down, c.recv.r, c.recv.conn, n, c.p.opts.IdleTimeout)
}

// spliceFrame copies n bytes from src, which reads srcConn, to dst, which writes dstConn. Between
// two TCP connections, a frame of spliceMin bytes or more has what src does not hold yet moved by
// the kernel, after what dst holds has been written; otherwise it goes through the buffers
// (copyFrame). Each chunk the kernel moves must be written within writeTimeout.
func spliceFrame(dst *bufio.Writer, dstConn net.Conn, src *bufio.Reader, srcConn net.Conn, n int64, writeTimeout time.Duration) (int64, error) {
	to, toTCP := dstConn.(*net.TCPConn)
	from, fromTCP := srcConn.(*net.TCPConn)
	held := int64(src.Buffered())
	if !toTCP || !fromTCP || n < spliceMin || held >= n {
		return copyFrame(dst, src, n)
	}
	copied, err := copyFrame(dst, src, held)
	if err != nil {
		return copied, err
	}
	// The frame's first bytes, and the frames before it, leave before the kernel moves the rest.
	if err := dst.Flush(); err != nil {
		return copied, fmt.Errorf("%w: %w", errWrite, err)
	}
	for copied < n {
		if err := to.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil {
			return copied, fmt.Errorf("%w: %w", errWrite, err)
		}
		chunk := min(n-copied, spliceChunk)
		moved, err := to.ReadFrom(&io.LimitedReader{R: from, N: chunk})
		copied += moved
		switch {
		case err != nil:
			return copied, err
		case moved < chunk: // the upstream ended mid-frame
			return copied, io.ErrUnexpectedEOF
		}
	}
	return copied, nil
}
