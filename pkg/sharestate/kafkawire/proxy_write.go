package kafkawire

import (
	"encoding/binary"
	"fmt"
	"runtime"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// upstreamEvent is what upstreamWatch reported while nothing was owed by the upstream: a response
// header arrived (err nil), or the upstream ended.
type upstreamEvent struct {
	err error
}

// writeLoop writes the responses owed, in request order, flushing whenever it would otherwise wait.
// It returns a close reason if the pair had to close before the reader was done. After a failure it
// keeps taking the queue, so the reader never blocks on it.
func (c *proxyConn) writeLoop() string {
	failed := ""
	var early *upstreamEvent
	for {
		pd, ok := c.nextPending(&failed, &early)
		if !ok {
			if failed == "" {
				_ = c.downW.Flush()
			}
			return failed
		}
		c.p.metrics.inFlight.Dec()
		if failed == "" {
			failed = c.writeOne(pd, &early)
		}
		// Owed until written: the reader must not take a connection awaiting it for an idle one.
		c.owedCount.Add(-1)
	}
}

// writeOne writes one response owed, closing the pair if that fails.
func (c *proxyConn) writeOne(pd owed, early **upstreamEvent) string {
	var failed string
	if pd.local != nil {
		failed = c.writeLocal(pd)
	} else {
		failed = c.streamUpstream(pd, early)
	}
	if failed != "" {
		c.closeBoth()
	}
	return failed
}

// nextPending takes the next response owed, flushing first if none is queued yet. While it waits
// with nothing owed, it watches the upstream too: an upstream that ends then closes the pair, and a
// response header that arrives is kept in early for the entry it belongs to.
func (c *proxyConn) nextPending(failed *string, early **upstreamEvent) (owed, bool) {
	select {
	case pd, ok := <-c.queue:
		return pd, ok
	default:
	}
	if *failed == "" && c.downW.Buffered() > 0 {
		if err := c.downW.Flush(); err != nil {
			*failed = closedWriteError
			c.closeBoth()
		}
	}
	for {
		if *failed == "" && *early != nil && (*early).err != nil && len(c.queue) == 0 {
			// The upstream ended with nothing owed: the pair is of no more use.
			*failed = closedUpstreamClosed
			c.closeBoth()
		}
		watch := c.upReady
		if *failed != "" || *early != nil {
			watch = nil
		}
		select {
		case pd, ok := <-c.queue:
			return pd, ok
		case err := <-watch:
			*early = &upstreamEvent{err: err}
		}
	}
}

// writeLocal writes a local answer once it is ready.
func (c *proxyConn) writeLocal(pd owed) string {
	ready := false
	select {
	case <-pd.local.done:
		ready = true
	default:
	}
	if !ready {
		// Answers computed together (one status update) are ready together: let their goroutines
		// finish before deciding to flush.
		runtime.Gosched()
		select {
		case <-pd.local.done:
		default:
			if err := c.downW.Flush(); err != nil {
				return closedWriteError
			}
			select {
			case <-pd.local.done:
			case <-c.closed:
				return closedShutdown
			}
		}
	}
	if pd.local.frame == nil {
		_ = c.downW.Flush() // the answers before it leave before the close
		return closedPanic
	}
	if _, err := c.downW.Write(pd.local.frame); err != nil {
		return closedWriteError
	}
	return ""
}

// streamUpstream copies the upstream's response to pd to the downstream. Its header must name pd's
// correlation id: the upstream answers in order, as a Kafka broker does.
func (c *proxyConn) streamUpstream(pd owed, early **upstreamEvent) string {
	if reason := c.awaitUpstream(early); reason != "" {
		return reason
	}
	head, _ := c.upR.Peek(8) // upstreamWatch saw 8 bytes buffered
	size := int32(binary.BigEndian.Uint32(head))
	corrID := int32(binary.BigEndian.Uint32(head[4:]))
	if size < 4 || corrID != pd.corrID {
		c.p.log.Info("Closed a connection whose upstream answered out of order", "remote", c.down.RemoteAddr().String(),
			"correlationId", corrID, "expected", pd.corrID, "size", size)
		return closedUpstreamError
	}
	if pd.key == keySASLAuthenticate {
		c.authenticated.Store(c.authenticationAccepted(pd.version))
	}
	var err error
	if pd.key == KeyAPIVersions {
		err = c.rewriteAPIVersions(pd.version)
	} else {
		var n int64
		n, err = copyFrame(c.downW, c.upR, int64(size)+4)
		c.p.metrics.bytesFromUpstream.Add(float64(n))
	}
	if err != nil {
		c.p.log.V(1).Info("Streaming a response failed", "remote", c.down.RemoteAddr().String(), "error", err.Error())
		return closedWriteError
	}
	select {
	case c.consumed <- struct{}{}:
	case <-c.closed:
		return closedShutdown
	}
	return ""
}

// awaitUpstream waits until the upstream's next response header has arrived.
func (c *proxyConn) awaitUpstream(early **upstreamEvent) string {
	var err error
	if *early != nil {
		err, *early = (*early).err, nil
	} else {
		select {
		case err = <-c.upReady:
		default:
			if ferr := c.downW.Flush(); ferr != nil {
				return closedWriteError
			}
			select {
			case err = <-c.upReady:
			case <-c.closed:
				return closedShutdown
			}
		}
	}
	if err != nil {
		c.p.log.V(1).Info("The upstream connection ended with responses owed", "remote", c.down.RemoteAddr().String(), "error", err.Error())
		return closedUpstreamClosed
	}
	return ""
}

// rewriteAPIVersions reads the upstream's ApiVersions response whole and writes it with the
// share-state APIs' versions replaced by those served here.
func (c *proxyConn) rewriteAPIVersions(version int16) error {
	frame, err := ReadFrame(c.upR, DefaultMaxResponseBytes)
	if err != nil {
		return fmt.Errorf("reading the upstream's ApiVersions response: %w", err)
	}
	c.p.metrics.bytesFromUpstream.Add(float64(len(frame) + 4))
	_, err = c.downW.Write(RewriteAPIVersions(frame, version))
	return err
}

// upstreamWatch waits for each upstream response's header and reports it on upReady, then leaves
// upR to the writer until it has streamed the response. It reports the error that ends the upstream.
func (c *proxyConn) upstreamWatch() {
	for {
		_, err := c.upR.Peek(8)
		select {
		case c.upReady <- err:
		case <-c.closed:
			return
		}
		if err != nil {
			return
		}
		select {
		case <-c.consumed:
		case <-c.closed:
			return
		}
	}
}

// authenticationAccepted reads, without consuming it, whether the upstream's SaslAuthenticate
// response at the head of upR has no error: its error code follows the header (v1, with tagged
// fields, from v2).
func (c *proxyConn) authenticationAccepted(version int16) bool {
	head, _ := c.upR.Peek(8) // upstreamWatch saw 8 bytes buffered
	size := int(binary.BigEndian.Uint32(head))
	head, _ = c.upR.Peek(min(size+4, 64)) // short only if the upstream ends: then not accepted
	r := kbin.Reader{Src: head}
	r.Int32() // size
	r.Int32() // correlation id
	if version >= 2 {
		kmsg.SkipTags(&r)
	}
	code := r.Int16()
	return r.Ok() && code == 0
}
