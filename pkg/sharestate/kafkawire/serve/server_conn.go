package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// conn is one client connection. Its reader reads and decodes requests one after the other and starts
// each on a goroutine of its own, so that the requests of a pipelining client are served concurrently
// (and writes to one partition can share a status update); it queues them in arrival order. Its
// writer takes them from the queue in that order and writes each response once it is ready, so that
// responses leave in request order whatever order they are computed in, as Kafka's clients require.
// The queue's capacity bounds the requests in flight.
type conn struct {
	s  *Server
	nc net.Conn
	r  *bufio.Reader

	queue      chan *exchange
	inFlight   atomic.Int32
	lastActive atomic.Int64 // unix nanoseconds of the last request read or response written

	mu       sync.Mutex // orders stopReading against the reader's deadline changes
	stopping bool       // stop reading: the server is shutting down
	inFrame  bool       // the reader is inside a frame; a stop waits for its end
}

// exchange is one request and, once done is closed, its response frame. A nil frame closes the
// connection instead (the request's handling failed in a way that leaves no answer to give).
type exchange struct {
	done  chan struct{}
	frame []byte
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, r: bufio.NewReaderSize(nc, 64<<10), queue: make(chan *exchange, s.opts.MaxInFlightPerConnection)}
	c.touch()
	return c
}

func (c *conn) touch() { c.lastActive.Store(time.Now().UnixNano()) }

// serve runs the connection until it closes, and returns why it closed.
func (c *conn) serve() string {
	writerDone := make(chan string, 1)
	go func() { writerDone <- c.writeLoop() }()
	reason := c.readLoop()
	close(c.queue)
	if wr := <-writerDone; wr != "" {
		reason = wr
	}
	_ = c.nc.Close()
	return reason
}

// readLoop reads requests until the connection ends or must be closed, and returns why.
func (c *conn) readLoop() string {
	for {
		frame, err := c.readFrame()
		if err != nil {
			return c.readFailure(err)
		}
		req, err := decodeRecovering(frame)
		if err != nil {
			c.s.queued.Release(int64(len(frame)))
			return c.refuse(err)
		}
		c.touch()
		ex := &exchange{done: make(chan struct{})}
		c.inFlight.Add(1)
		c.s.obs.RequestRead()
		go c.s.run(req, ex, int64(len(frame)))
		c.queue <- ex // blocks while MaxInFlightPerConnection requests are unanswered
	}
}

var (
	errStopping = errors.New("the server is shutting down")
	errPeerIdle = errors.New("the connection was idle")
)

// readFrame waits for the next request frame and reads it. While waiting it wakes up every idle
// timeout, and ends the connection only if it really was idle, neither sending nor awaiting anything.
// The frame's size is taken from the server's budget of queued request bytes before its bytes are
// read; the caller gives it back once the request is answered, or refused.
func (c *conn) readFrame() ([]byte, error) {
	for {
		if err := c.betweenFrames(); err != nil {
			return nil, err
		}
		_, err := c.r.Peek(1)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, err
		}
		if c.isStopping() {
			return nil, errStopping
		}
		if c.idle() {
			return nil, errPeerIdle
		}
	}
	if err := c.enterFrame(); err != nil {
		return nil, err
	}
	size, err := c.peekSize()
	if err != nil {
		return nil, err
	}
	if err := c.s.queued.Acquire(c.s.ctx, int64(size)); err != nil {
		return nil, errStopping // the shutdown's deadline passed while this reader waited
	}
	// The budget is held from here: the frame's bytes must come within the frame timeout.
	if err := c.nc.SetReadDeadline(time.Now().Add(c.frameTimeout())); err != nil {
		c.s.queued.Release(int64(size))
		return nil, err
	}
	frame, err := kafkawire.ReadFrame(c.r, c.s.opts.MaxRequestBytes)
	if err != nil {
		c.s.queued.Release(int64(size))
		return nil, err
	}
	return frame, nil
}

// peekSize returns the size the next frame announces, consuming nothing: a size above the maximum
// is refused before a byte of its frame is read or counted.
func (c *conn) peekSize() (int, error) {
	field, err := c.r.Peek(4)
	if err != nil {
		if errors.Is(err, io.EOF) { // a byte was there: the stream ended inside the size field
			return 0, io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return kafkawire.FrameSize([4]byte(field), c.s.opts.MaxRequestBytes)
}

// frameTimeout bounds the arrival of a frame's bytes once it has begun.
func (c *conn) frameTimeout() time.Duration {
	return min(c.s.opts.IdleTimeout, c.s.opts.RequestTimeout)
}

// betweenFrames arms the idle deadline, unless the server is stopping.
func (c *conn) betweenFrames() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return errStopping
	}
	c.inFrame = false
	return c.nc.SetReadDeadline(time.Now().Add(c.s.opts.IdleTimeout))
}

// enterFrame marks a frame begun: a shutdown lets the reader finish it (bounded by the frame
// timeout), so a request the client has started to send is still answered.
func (c *conn) enterFrame() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFrame = true
	return c.nc.SetReadDeadline(time.Now().Add(c.frameTimeout()))
}

// stopReading makes the reader stop before its next frame: at once when it is waiting for one.
func (c *conn) stopReading() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = true
	if !c.inFrame {
		_ = c.nc.SetReadDeadline(time.Now())
	}
}

// closeNow closes the connection at once: a shutdown whose time is up.
func (c *conn) closeNow() { _ = c.nc.Close() }

func (c *conn) idle() bool {
	return c.inFlight.Load() == 0 && time.Since(time.Unix(0, c.lastActive.Load())) >= c.s.opts.IdleTimeout
}

// readFailure names (and logs, when it is news) why reading ended.
func (c *conn) readFailure(err error) string {
	var size *kafkawire.FrameSizeError
	switch {
	case errors.Is(err, io.EOF):
		return closedByPeer
	case errors.Is(err, errStopping), c.isStopping() && errors.Is(err, os.ErrDeadlineExceeded):
		return closedShutdown
	case errors.Is(err, errPeerIdle):
		c.s.log.V(1).Info("Closed an idle connection", "remote", c.nc.RemoteAddr().String())
		return closedIdle
	case errors.As(err, &size):
		c.s.log.Info("Closed a connection that sent an oversized or malformed frame", "remote", c.nc.RemoteAddr().String(), "size", size.Size, "max", size.Max)
		if size.Size < 0 {
			return closedMalformed
		}
		return closedOversized
	default:
		c.s.log.V(1).Info("Reading from a connection failed", "remote", c.nc.RemoteAddr().String(), "error", err.Error())
		return closedReadError
	}
}

func (c *conn) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

// refuse counts and logs a request the server does not answer; the connection closes after the
// responses to the requests before it.
func (c *conn) refuse(err error) string {
	var r *refusal
	if !errors.As(err, &r) {
		r = &refusal{reason: closedMalformed, api: "Unknown", code: sharestate.ErrInvalidRequest, err: err}
	}
	c.s.obs.RequestCounted(r.api, r.code)
	if r.reason == closedPanic {
		c.s.log.Error(r.err, "Decoding a request panicked; closed its connection", "remote", c.nc.RemoteAddr().String())
		return r.reason
	}
	c.s.log.Info("Closed a connection that sent a request this server does not serve", "remote", c.nc.RemoteAddr().String(), "reason", r.reason, "error", r.err.Error())
	return r.reason
}

// decodeRecovering is decode, with a panic (a decoder's bug on hostile input) turned into a refusal:
// the connection closes, the process and every other connection go on.
func decodeRecovering(frame []byte) (req request, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &refusal{reason: closedPanic, api: "Unknown", code: sharestate.ErrUnknownServerError,
				err: fmt.Errorf("decoding the request panicked: %v\n%s", p, debug.Stack())}
		}
	}()
	return decode(frame)
}

// run serves one request and completes its exchange; queuedBytes, its frame's size, goes back to
// the server's budget of queued request bytes once it is answered.
func (s *Server) run(req request, ex *exchange, queuedBytes int64) {
	start := time.Now()
	defer close(ex.done)
	defer s.queued.Release(queuedBytes)
	defer func() {
		// A panic in the store or in encoding the response, on this goroutine, must not take down every
		// other connection; this one closes (a nil frame), as after an answer that cannot be given.
		// (A panic on a goroutine the store starts itself is beyond this recover: the store's to catch.)
		if p := recover(); p != nil {
			s.log.Error(fmt.Errorf("panic: %v", p), "Serving a request panicked", "api", req.api, "stack", string(debug.Stack()))
			s.obs.RequestCounted(req.api, sharestate.ErrUnknownServerError)
			ex.frame = nil
		}
	}()
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.RequestTimeout)
	defer cancel()
	// The store records the broker that sent a Read or Write as the partition's leader: in proxy mode
	// that is seldom the broker of this sidecar.
	ctx = withSender(ctx, req.header)
	resp, code := req.serve(ctx, s.opts.Store)
	ex.frame = kafkawire.AppendResponse(nil, req.header, resp)
	s.obs.RequestCounted(req.api, code)
	s.obs.RequestServed(req.api, time.Since(start))
}

// writeLoop writes the responses in request order, flushing whenever it would otherwise wait, so that
// responses that are ready together leave in one write. It returns a close reason if writing failed.
func (c *conn) writeLoop() string {
	w := bufio.NewWriterSize(c.nc, 64<<10)
	failed := ""
	for {
		ex, ok := c.next(w, failed == "")
		if !ok {
			if failed == "" {
				_ = c.flush(w)
			}
			return failed
		}
		frame, ready := c.await(ex, w, failed == "")
		c.inFlight.Add(-1)
		c.s.obs.RequestWritten()
		if failed != "" {
			continue // drain the queue, so the reader never blocks on it
		}
		failed = c.write(w, frame, ready)
	}
}

// next takes the next exchange, flushing first if none is queued yet.
func (c *conn) next(w *bufio.Writer, flush bool) (*exchange, bool) {
	select {
	case ex, ok := <-c.queue:
		return ex, ok
	default:
	}
	if flush {
		_ = c.flush(w)
	}
	ex, ok := <-c.queue
	return ex, ok
}

// await waits for an exchange's response, flushing first if it is not ready yet. ready is false if
// the server gave up waiting (a shutdown past its deadline).
func (c *conn) await(ex *exchange, w *bufio.Writer, flush bool) (frame []byte, ready bool) {
	select {
	case <-ex.done:
		return ex.frame, true
	default:
	}
	// The writes of one status update are answered together: let their goroutines, runnable by now,
	// finish before deciding to flush, so the burst of answers leaves in one write.
	runtime.Gosched()
	select {
	case <-ex.done:
		return ex.frame, true
	default:
	}
	if flush {
		_ = c.flush(w)
	}
	select {
	case <-ex.done:
		return ex.frame, true
	case <-c.s.ctx.Done():
		return nil, false
	}
}

// write writes one response; it returns a close reason when the connection must end.
func (c *conn) write(w *bufio.Writer, frame []byte, ready bool) string {
	switch {
	case !ready:
		_ = c.nc.Close()
		return closedShutdown
	case frame == nil:
		// The requests before this one were answered: their responses leave before the close, as a
		// refused request's do.
		_ = c.flush(w)
		_ = c.nc.Close()
		return closedPanic
	}
	if _, err := w.Write(frame); err != nil {
		_ = c.nc.Close() // wakes the reader
		return closedWriteError
	}
	c.touch()
	return ""
}

// flush writes out what is buffered. A client that stops reading its responses gets the idle timeout
// to start again, then its connection is closed.
func (c *conn) flush(w *bufio.Writer) error {
	if w.Buffered() == 0 {
		return nil
	}
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.s.opts.IdleTimeout))
	if err := w.Flush(); err != nil {
		_ = c.nc.Close()
		return err
	}
	return nil
}
