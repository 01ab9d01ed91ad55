package serve

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// writeLoop writes the responses owed, in request order, flushing whenever it would otherwise wait.
// It returns a close reason if the pair had to close before the reader was done. After a failure it
// keeps taking the queue, so the reader never blocks on it.
func (c *proxyConn) writeLoop() string {
	failed := ""
	for {
		pd, ok := c.nextOwed(&failed)
		if !ok {
			if failed == "" {
				_ = c.downW.Flush()
			}
			return failed
		}
		c.p.obs.RequestWritten()
		if failed == "" {
			failed = c.writeOne(pd)
		}
		// Owed until written: the reader must not take a connection awaiting it for an idle one.
		c.owedCount.Add(-1)
	}
}

// writeOne writes one response owed, closing the pair if that fails.
func (c *proxyConn) writeOne(pd owed) string {
	var failed string
	if pd.local != nil {
		failed = c.writeLocal(pd)
	} else {
		failed = c.streamUpstream(pd)
		c.forwardedAnswered()
	}
	if failed != "" {
		c.closeBoth()
	}
	return failed
}

// nextOwed takes the next response owed, flushing first if none is queued yet. While nothing is
// owed it watches the upstream, to learn of its end (upstreamEnded); with no upstream to watch (the
// last ended, and none was dialled since) it waits for the queue alone.
func (c *proxyConn) nextOwed(failed *string) (owed, bool) {
	for {
		select {
		case pd, ok := <-c.queue:
			return pd, ok
		default:
		}
		if *failed != "" {
			// The pair is closed: the reader stops and closes the queue.
			pd, ok := <-c.queue
			return pd, ok
		}
		if c.downW.Buffered() > 0 {
			if err := c.downW.Flush(); err != nil {
				*failed = closedWriteError
				c.closeBoth()
			}
			continue
		}
		if !c.followNewest() {
			// No upstream to watch: the next entry, a local answer or a request forwarded to a new
			// upstream, or the queue's end, comes through the queue.
			pd, ok := <-c.queue
			return pd, ok
		}
		if c.watchIdleUpstream() {
			// Bytes from the upstream: the entry of the response they begin was queued before its
			// request was forwarded. (Bytes nothing was asked for wait for the next request,
			// whose correlation id they then fail to match.)
			pd, ok := <-c.queue
			return pd, ok
		}
	}
}

// watchIdleUpstream waits, with nothing owed, until the upstream sends bytes (upstreamSpoke) or ends
// (judged by upstreamEnded), or the reader queues what the upstream will not announce: a local
// answer, or the queue's end. The reader wakes it then by expiring the upstream's read deadline, so
// that no goroutine but the writer ever reads the upstream and each response reaches the downstream
// with one hand-off less. (So the writer learns of the upstream's end only when it has nothing
// queued: a request forwarded before that meets the ended upstream, and the pair closes as it must
// with a response owed. The writer is back here as soon as it has written what is queued.)
func (c *proxyConn) watchIdleUpstream() (upstreamSpoke bool) {
	c.watchMu.Lock()
	if len(c.queue) > 0 || c.queueEnded {
		c.watchMu.Unlock()
		return false
	}
	c.watching, c.watched = true, c.recv.conn
	c.watchMu.Unlock()

	_, err := c.recv.r.Peek(1)

	c.watchMu.Lock()
	woken := c.woken
	c.watching, c.woken = false, false
	c.watchMu.Unlock()
	if woken {
		_ = c.recv.conn.SetReadDeadline(time.Time{})
	}
	switch {
	case err == nil:
		return true
	case !woken || !errors.Is(err, os.ErrDeadlineExceeded):
		c.upstreamEnded(err)
	}
	return false
}

// wakeWriter wakes the writer if it is watching the idle upstream: called by the reader after it
// queued a local answer or ended the queue.
func (c *proxyConn) wakeWriter() {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	if c.watching && !c.woken {
		c.woken = true
		_ = c.watched.SetReadDeadline(time.Now())
	}
}

// endQueue tells the writer that no more responses will be owed.
func (c *proxyConn) endQueue() {
	c.watchMu.Lock()
	c.queueEnded = true
	close(c.queue)
	c.watchMu.Unlock()
	c.wakeWriter()
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
func (c *proxyConn) streamUpstream(pd owed) string {
	c.follow(pd.up)
	head, reason := c.awaitUpstream()
	if reason != "" {
		return reason
	}
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
	if pd.key == kafkawire.KeyAPIVersions {
		err = c.rewriteAPIVersions(pd.version)
	} else {
		var n int64
		n, err = c.copyResponse(int64(size) + 4)
		c.p.obs.BytesFromUpstream(n)
	}
	if err != nil {
		c.p.log.V(1).Info("Streaming a response failed", "remote", c.down.RemoteAddr().String(), "error", err.Error())
		return closedWriteError
	}
	return ""
}

// awaitUpstream waits until the upstream's next response header has arrived and returns it,
// flushing what the downstream is owed first if it has to wait.
func (c *proxyConn) awaitUpstream() ([]byte, string) {
	if c.recv.r.Buffered() < 8 && c.downW.Buffered() > 0 {
		if err := c.downW.Flush(); err != nil {
			return nil, closedWriteError
		}
	}
	head, err := c.recv.r.Peek(8)
	if err != nil {
		c.p.log.V(1).Info("The upstream connection ended with responses owed", "remote", c.down.RemoteAddr().String(), "error", err.Error())
		return nil, closedUpstreamClosed
	}
	return head, ""
}

// rewriteAPIVersions reads the upstream's ApiVersions response whole and writes it with the
// share-state APIs' versions replaced by those served here; one it cannot rewrite goes unchanged.
func (c *proxyConn) rewriteAPIVersions(version int16) error {
	frame, err := kafkawire.ReadFrame(c.recv.r, kafkawire.DefaultMaxResponseBytes)
	if err != nil {
		return fmt.Errorf("reading the upstream's ApiVersions response: %w", err)
	}
	c.p.obs.BytesFromUpstream(int64(len(frame) + 4))
	out, err := RewriteAPIVersions(frame, version)
	if err != nil {
		c.unrewritten(err, version)
	}
	_, err = c.downW.Write(out)
	return err
}

// unrewritten counts an ApiVersions response forwarded unchanged, and logs the first of the
// connection's that did not decode: its peer then does not know the share-state versions served
// here, and a broker may stop sending them here, which nothing else would show. The v0 fallback of
// KIP-511 is routine (the client retries), so it is logged only at V(1).
func (c *proxyConn) unrewritten(err error, version int16) {
	reason := unrewrittenUndecodable
	if errors.Is(err, errAPIVersionsErrorCode) {
		reason = unrewrittenErrorCode
	}
	c.p.obs.APIVersionsUnrewritten(reason)
	log := c.p.log.V(1)
	if reason == unrewrittenUndecodable && !c.apiVersionsLogged {
		c.apiVersionsLogged = true
		log = c.p.log
	}
	log.Info("Forwarded the upstream's ApiVersions response without the share-state versions served here",
		"remote", c.down.RemoteAddr().String(), "version", version, "served", servedShareStateVersions(), "error", err.Error())
}

// servedShareStateVersions lists the versions of keys 83–87 served here, as "key:min-max" pairs.
func servedShareStateVersions() string {
	var b strings.Builder
	for _, a := range kafkawire.APIs {
		if isShareStateKey(a.Key) {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%d:%d-%d", a.Key, a.MinVersion, a.MaxVersion)
		}
	}
	return b.String()
}

// authenticationAccepted reads, without consuming it, whether the upstream's SaslAuthenticate
// response at the head of the upstream's reader has no error: its error code follows the header (v1, with tagged
// fields, from v2).
func (c *proxyConn) authenticationAccepted(version int16) bool {
	head, _ := c.recv.r.Peek(8) // streamUpstream saw 8 bytes buffered
	size := int(binary.BigEndian.Uint32(head))
	head, _ = c.recv.r.Peek(min(size+4, 64)) // short only if the upstream ends: then not accepted
	r := kbin.Reader{Src: head}
	r.Int32() // size
	r.Int32() // correlation id
	if version >= 2 {
		kmsg.SkipTags(&r)
	}
	code := r.Int16()
	return r.Ok() && code == 0
}
