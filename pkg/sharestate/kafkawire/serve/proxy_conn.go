package serve

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// Why a proxied connection is closed, beyond the Server's reasons (server_dispatch.go).
const (
	closedUpstreamDial   = "upstream_dial_error"
	closedUpstreamClosed = "upstream_closed"
	closedUpstreamError  = "upstream_protocol_error"
	// closedUpstreamAuthenticated: the upstream of a connection that authenticated through it ended
	// with nothing owed; the answers owed were written first (proxy_upstream.go).
	closedUpstreamAuthenticated = "upstream_closed_authenticated"
	// closedUnauthenticated: a share-state request before SASL authentication (RequireAuthentication).
	closedUnauthenticated = "unauthenticated"
	// closedSASLHandshakeV0: SaslHandshake v0, whose SASL tokens would follow without request headers.
	closedSASLHandshakeV0 = "sasl_handshake_v0"
)

// keySASLHandshake is SaslHandshake's API key.
const keySASLHandshake int16 = 17

var errSASLHandshakeV0 = errors.New("SaslHandshake v0 is not supported: after it the SASL tokens travel without request headers, " +
	"which the proxy cannot tell from requests; Kafka's clients use v1 when the broker lists it")

// proxyConn is one downstream connection and the upstream connection it owns. Two goroutines run it,
// each a copy loop. The reader reads the downstream's requests: it forwards each one upstream as its
// bytes arrive, or reads and decodes a share-state request and starts it on the local server; either
// way it queues what the response will be, in request order. The writer takes the queue in that
// order and, for each entry, streams the upstream's response to the downstream or writes the local
// answer once it is ready, so a quick local answer waits behind slower upstream ones. The writer
// alone reads the upstream: while nothing is owed it waits there too, so it learns of an upstream
// that closes while nothing is in flight (watchIdleUpstream). Such an upstream is replaced by a new
// one when the next request must be forwarded (proxy_upstream.go): so send and recv, the upstream
// each goroutine uses, differ between the re-dial and the writer's first read of the new one.
type proxyConn struct {
	p    *Proxy
	down net.Conn

	downR *bufio.Reader // the reader's
	downW *bufio.Writer // the writer's
	send  *upstream     // the reader's: where requests are forwarded
	recv  *upstream     // the writer's: where responses are read
	// recvEnded (the writer's): recv ended; the writer no longer watches it (upstreamEnded).
	recvEnded bool

	// upMu orders the writer's verdict on an upstream's end against the reader's forwarding.
	upMu sync.Mutex
	// newest is the last upstream dialled: the one closeBoth closes.
	newest *upstream
	// upEnded: newest ended with nothing owed; the next forwarded request dials again.
	upEnded bool
	// forwardedOwed counts the forwarded requests whose responses the writer has not yet read.
	forwardedOwed int

	queue chan owed
	// owedCount is the responses queued and not yet written: a connection is idle only without any.
	owedCount atomic.Int64
	closed    chan struct{}

	// watchMu orders the writer's wait on the idle upstream against the reader's wake-ups.
	watchMu    sync.Mutex
	watching   bool     // the writer waits on the upstream with nothing owed
	watched    net.Conn // the upstream it waits on
	woken      bool     // the reader expired the upstream's read deadline to wake it
	queueEnded bool     // the queue is closed

	// authenticated is set by the writer once the upstream accepted a SaslAuthenticate, before the
	// client sees that answer: a client sends its next request only after it, so the reader sees it.
	authenticated atomic.Bool

	closeOnce sync.Once
	mu        sync.Mutex // orders stopReading against the reader's deadline changes
	stopping  bool
	inFrame   bool
	// stopReason names why the reader was stopped: a shutdown unless stopReadingFor says otherwise.
	stopReason string

	// apiVersionsLogged: an unrewritten ApiVersions answer was logged; later ones are only counted.
	apiVersionsLogged bool // the writer's
}

// owed is a response owed to the downstream, in request order: the upstream's response to
// corrID, or the local exchange's answer.
type owed struct {
	corrID  int32
	key     int16
	version int16
	local   *exchange
	// up is the upstream a forwarded request went to (nil for a local answer).
	up *upstream
}

func newProxyConn(p *Proxy, down, up net.Conn) *proxyConn {
	timeout := p.opts.IdleTimeout
	u := newUpstream(up, timeout)
	return &proxyConn{
		p: p, down: down, send: u, recv: u, newest: u,
		downR: bufio.NewReaderSize(down, 64<<10), downW: bufio.NewWriterSize(deadlineWriter{down, timeout}, 64<<10),
		queue:  make(chan owed, p.opts.MaxInFlightPerConnection),
		closed: make(chan struct{}),
	}
}

// closeBoth closes both connections, which wakes every goroutine of the pair. It reports whether
// this call closed them (false: they were closed already).
func (c *proxyConn) closeBoth() bool {
	closedNow := false
	c.closeOnce.Do(func() {
		closedNow = true
		close(c.closed)
		_ = c.down.Close()
		// Under upMu: an upstream dialled again meanwhile is either closed here, or sees c.closed.
		c.upMu.Lock()
		_ = c.newest.conn.Close()
		c.upMu.Unlock()
	})
	return closedNow
}

// serve runs the pair until either side ends, and returns why.
func (c *proxyConn) serve() string {
	writerDone := make(chan string, 1)
	go func() { writerDone <- c.writeLoop() }()
	reason, drain := c.readLoop()
	// Whoever closes the pair first names the reason: a reader that closes it (an idle or broken
	// downstream) is not overruled by the writer then seeing the upstream closed.
	readerClosed := !drain && c.closeBoth()
	c.endQueue()
	if wr := <-writerDone; wr != "" && !readerClosed {
		reason = wr
	}
	c.closeBoth()
	return reason
}

// readLoop forwards or answers requests until the downstream ends or must be closed. It returns why,
// and whether the responses already owed should still be written before the close (a shutdown, a
// refused request) or the pair closed at once (the downstream is gone or broken).
func (c *proxyConn) readLoop() (reason string, drain bool) {
	for {
		if err := c.waitForFrame(); err != nil {
			return c.readFailure(err)
		}
		head, err := c.downR.Peek(4)
		if err != nil {
			return c.readFailure(kafkawire.InFrame(err))
		}
		// A request is at least its header's key, version and correlation id.
		size := int32(binary.BigEndian.Uint32(head))
		if size < 0 {
			return c.readFailure(&kafkawire.FrameSizeError{Size: size, Max: c.p.local.opts.MaxRequestBytes})
		}
		if size < 8 {
			return c.readFailure(kafkawire.ErrShortHeader)
		}
		if head, err = c.downR.Peek(12); err != nil {
			return c.readFailure(kafkawire.InFrame(err))
		}
		key := int16(binary.BigEndian.Uint16(head[4:]))
		version := int16(binary.BigEndian.Uint16(head[6:]))
		corrID := int32(binary.BigEndian.Uint32(head[8:]))
		switch {
		case key == keySASLHandshake && version == 0:
			err = &refusal{reason: closedSASLHandshakeV0, api: "SaslHandshake", err: errSASLHandshakeV0}
		case isShareStateKey(key):
			err = c.answerLocally(key)
		default:
			err = c.forward(int64(size)+4, key, version, corrID)
		}
		if err != nil {
			var r *refusal
			if errors.As(err, &r) {
				// The requests forwarded before it are answered before the close: they must leave.
				_ = c.send.w.Flush() // an error ends the upstream, which the writer sees
				return c.refuse(r), true
			}
			return c.readFailure(err)
		}
	}
}

func isShareStateKey(key int16) bool {
	return key >= kafkawire.KeyInitializeShareGroupState && key <= kafkawire.KeyReadShareGroupStateSummary
}

// waitForFrame waits until the downstream's next frame begins, flushing what was forwarded first.
func (c *proxyConn) waitForFrame() error {
	if c.downR.Buffered() == 0 {
		if err := c.send.w.Flush(); err != nil {
			return fmt.Errorf("%w: %w", errWrite, err)
		}
	}
	if err := c.betweenFrames(); err != nil {
		return err
	}
	for {
		_, err := c.downR.Peek(1)
		if err == nil {
			break
		}
		switch {
		case !errors.Is(err, os.ErrDeadlineExceeded):
			return err
		case c.isStopping():
			return errStopping
		case c.owedCount.Load() == 0:
			return errPeerIdle
		}
		// Responses are still owed: the downstream waits for them, it is not idle.
		if err := c.betweenFrames(); err != nil {
			return err
		}
	}
	return c.enterFrame()
}

// deadlineWriter bounds every write to a connection: a peer that stops reading fails the write
// after timeout instead of blocking its writer forever.
type deadlineWriter struct {
	conn    net.Conn
	timeout time.Duration
}

func (w deadlineWriter) Write(p []byte) (int, error) {
	if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
		return 0, err
	}
	return w.conn.Write(p)
}

// forward queues the upstream's response (unless the request gets none) and copies the request's
// frame, length bytes with its size field, upstream.
func (c *proxyConn) forward(length int64, key, version int16, corrID int32) error {
	respond := true
	if key == keyProduce {
		var err error
		if respond, err = c.produceResponds(length, version); err != nil {
			return &refusal{reason: closedMalformed, api: "Produce", err: err}
		}
	}
	if err := c.claimUpstream(respond); err != nil {
		return err
	}
	if respond {
		c.push(owed{corrID: corrID, key: key, version: version, up: c.send})
	}
	c.p.obs.Request(key, RouteForwarded)
	n, err := copyFrame(c.send.w, c.downR, length)
	c.p.obs.BytesToUpstream(n)
	if err != nil {
		return fmt.Errorf("forwarding a request upstream: %w", kafkawire.InFrame(err))
	}
	return nil
}

// errWrite marks the failure of a write, as opposed to a read: for the reader, a write to the
// upstream, which ends the pair as the upstream's close does.
var errWrite = errors.New("writing")

// copyFrame copies n bytes from src to dst through dst's buffer, in pieces of at most src's buffer
// size: the frames of pipelined requests or responses gather in dst's buffer and leave in one write
// when the loop flushes, while a large frame (a Fetch response) streams through without being held
// whole. (io.CopyN would hand dst's socket to bufio.Writer.ReadFrom, which writes each frame, or
// each piece of one, in a system call of its own.)
func copyFrame(dst *bufio.Writer, src *bufio.Reader, n int64) (int64, error) {
	var copied int64
	for copied < n {
		piece, err := src.Peek(int(min(n-copied, int64(src.Size()))))
		written, werr := dst.Write(piece)
		_, _ = src.Discard(written) // written bytes were peeked: they are buffered
		copied += int64(written)
		switch {
		case werr != nil:
			return copied, fmt.Errorf("%w: %w", errWrite, werr)
		case err != nil:
			return copied, kafkawire.InFrame(err)
		}
	}
	return copied, nil
}

// produceResponds reads, without consuming it, the start of a Produce request up to its acks.
func (c *proxyConn) produceResponds(length int64, version int16) (bool, error) {
	prefix, err := c.downR.Peek(int(min(length, int64(c.downR.Size()))))
	if err != nil {
		return false, kafkawire.InFrame(err)
	}
	return produceExpectsResponse(prefix[4:], version)
}

var errUnauthenticated = errors.New("a share-state request before SASL authentication")

// answerLocally reads a share-state request whole, decodes it and starts it on the local server.
func (c *proxyConn) answerLocally(key int16) error {
	s := c.p.local
	if c.p.opts.RequireAuthentication && !c.authenticated.Load() && !verifiedPeer(c.down) {
		return &refusal{reason: closedUnauthenticated, api: kmsg.NameForKey(key), err: errUnauthenticated}
	}
	// What was forwarded before leaves now: this request may wait for the byte budget or its bytes,
	// and the upstream's answers to the earlier requests must not wait with it.
	if err := c.send.w.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	size, err := c.peekSize()
	if err != nil {
		return err
	}
	if err := s.queued.Acquire(s.ctx, int64(size)); err != nil {
		return errStopping
	}
	// The frame's bytes get the idle timeout from now, not from before the wait for the budget.
	if err := c.enterFrame(); err != nil {
		s.queued.Release(int64(size))
		return err
	}
	frame, err := kafkawire.ReadFrame(c.downR, s.opts.MaxRequestBytes)
	if err != nil {
		s.queued.Release(int64(size))
		return err
	}
	req, err := decodeRecovering(frame)
	if err != nil {
		s.queued.Release(int64(size))
		// A share-state request refused here is counted as the sidecar's server counts it, by API and
		// error (UNSUPPORTED_VERSION, INVALID_REQUEST): both serve the same persister.
		var r *refusal
		if errors.As(err, &r) && r.code != sharestate.ErrNone {
			s.obs.RequestCounted(r.api, r.code)
		}
		return err
	}
	ex := &exchange{done: make(chan struct{})}
	c.p.obs.Request(key, RouteAnswered)
	go s.run(req, ex, int64(size))
	c.push(owed{corrID: req.header.CorrelationID, key: key, local: ex})
	// The upstream will not wake a writer waiting on it for this answer.
	c.wakeWriter()
	return nil
}

// verifiedPeer reports whether the downstream is a TLS connection whose client presented a
// certificate that was verified: an authenticated peer, as for Kafka's SSL client authentication.
func verifiedPeer(nc net.Conn) bool {
	tc, ok := nc.(*tls.Conn)
	return ok && len(tc.ConnectionState().VerifiedChains) > 0
}

func (c *proxyConn) peekSize() (int, error) {
	field, err := c.downR.Peek(4)
	if err != nil {
		return 0, kafkawire.InFrame(err)
	}
	return kafkawire.FrameSize([4]byte(field), c.p.local.opts.MaxRequestBytes)
}

// push queues a response owed. When the queue is full it waits for the writer, after flushing what
// was forwarded: the responses the writer waits for may be to those very requests.
func (c *proxyConn) push(pd owed) {
	c.p.obs.RequestRead()
	c.owedCount.Add(1)
	select {
	case c.queue <- pd:
		return
	default:
	}
	_ = c.send.w.Flush() // an error shows on the next write
	c.queue <- pd
}

// betweenFrames arms the idle deadline, unless the proxy is stopping.
func (c *proxyConn) betweenFrames() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return errStopping
	}
	c.inFrame = false
	return c.down.SetReadDeadline(time.Now().Add(c.p.opts.IdleTimeout))
}

// enterFrame marks a frame begun, whose bytes must arrive within the idle timeout: a shutdown lets
// the reader finish it.
func (c *proxyConn) enterFrame() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping && !c.inFrame {
		return errStopping
	}
	c.inFrame = true
	return c.down.SetReadDeadline(time.Now().Add(c.p.opts.IdleTimeout))
}

// stopReading makes the reader stop before its next frame: at once when it is waiting for one.
func (c *proxyConn) stopReading() { c.stopReadingFor(closedShutdown) }

// stopReadingFor stops the reader as stopReading does, the connection to be closed for reason once
// the responses owed are written. The first reason given stands.
func (c *proxyConn) stopReadingFor(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.stopping {
		c.stopReason = reason
	}
	c.stopping = true
	if !c.inFrame {
		_ = c.down.SetReadDeadline(time.Now())
	}
}

// closeNow closes both connections at once: a shutdown whose time is up.
func (c *proxyConn) closeNow() { c.closeBoth() }

// stoppedFor names why the reader was stopped.
func (c *proxyConn) stoppedFor() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopReason == "" {
		return closedShutdown
	}
	return c.stopReason
}

func (c *proxyConn) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

// readFailure names why reading ended, and whether the responses owed are still written.
func (c *proxyConn) readFailure(err error) (string, bool) {
	var size *kafkawire.FrameSizeError
	switch {
	case errors.Is(err, io.EOF):
		return closedByPeer, false
	case errors.Is(err, errStopping):
		return c.stoppedFor(), true
	case errors.Is(err, errUpstreamAuthenticated):
		return closedUpstreamAuthenticated, true
	case errors.Is(err, errRedial):
		c.p.log.Info("Connecting to the upstream again failed; closed the downstream connection after the answers owed",
			"remote", c.down.RemoteAddr().String(), "upstream", c.p.opts.Upstream, "error", err.Error())
		return closedUpstreamDial, true
	case errors.Is(err, errWrite):
		c.p.log.V(1).Info("Writing to the upstream failed", "remote", c.down.RemoteAddr().String(), "error", err.Error())
		return closedUpstreamClosed, false
	case errors.Is(err, errPeerIdle):
		c.p.log.V(1).Info("Closed an idle connection", "remote", c.down.RemoteAddr().String())
		return closedIdle, false
	case errors.Is(err, kafkawire.ErrShortHeader):
		c.p.log.Info("Closed a connection that sent a frame too short for a request header", "remote", c.down.RemoteAddr().String())
		return closedMalformed, true
	case errors.As(err, &size):
		c.p.log.Info("Closed a connection that sent an oversized or malformed frame", "remote", c.down.RemoteAddr().String(), "size", size.Size, "max", size.Max)
		return closedMalformed, true
	default:
		c.p.log.V(1).Info("Reading from a connection failed", "remote", c.down.RemoteAddr().String(), "error", err.Error())
		return closedReadError, false
	}
}

// refuse logs a request the proxy does not answer; the connection closes after the responses owed.
func (c *proxyConn) refuse(r *refusal) string {
	c.p.log.Info("Closed a connection that sent a request the proxy does not serve", "remote", c.down.RemoteAddr().String(),
		"reason", r.reason, "error", r.err.Error())
	return r.reason
}
