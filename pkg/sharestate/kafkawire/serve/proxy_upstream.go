package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// This file holds the life of a proxied connection's upstream half when the upstream ends with
// nothing owed. A stock broker's share-state persister sends only keys 83–87 on its connection to
// the proxy (and ApiVersions first), all answered here, so the upstream half carries nothing and the
// broker closes it after connections.max.idle.ms. Closing the downstream with it would cut the
// persister's requests in flight. So the downstream stays open, the local answers go on, and the
// upstream is dialled again when the next request must be forwarded. An upstream that ends with a
// forwarded request owed still closes both: that response is lost, and only a new connection tells
// the client so.

// upstream is one connection to the upstream broker: the reader writes requests to it (w), the
// writer reads their responses (r).
type upstream struct {
	conn net.Conn
	r    *bufio.Reader
	w    *bufio.Writer
}

func newUpstream(conn net.Conn, writeTimeout time.Duration) *upstream {
	return &upstream{
		conn: conn,
		r:    bufio.NewReaderSize(conn, 64<<10),
		w:    bufio.NewWriterSize(deadlineWriter{conn, writeTimeout}, 64<<10),
	}
}

// errRedial: dialling a new upstream for a forwarded request failed. The reader stops; the answers
// already owed are written before the close.
var errRedial = errors.New("dialling the upstream again")

// errUpstreamAuthenticated: the upstream of a connection authenticated through it (SASL) ended. A new
// upstream connection would be unauthenticated, and the broker would refuse or misread what follows;
// and a broker that ends an authenticated connection may mean its session to end
// (connections.max.reauth.ms). So the downstream is closed once the answers owed are written, and
// the peer reconnects and authenticates again.
var errUpstreamAuthenticated = errors.New("the upstream of an authenticated connection ended")

// claimUpstream readies the upstream for a request about to be forwarded, dialling a new one if the
// last ended with nothing owed, and counts its response owed (respond). Both under upMu, which the
// writer holds to judge an upstream's end: either the writer sees this request owed, and the end
// closes the pair, or this request sees the end, and goes to a new upstream. Never to a dead one.
func (c *proxyConn) claimUpstream(respond bool) error {
	c.upMu.Lock()
	ended := c.upEnded
	if !ended && respond {
		c.forwardedOwed++
	}
	c.upMu.Unlock()
	if !ended {
		return nil
	}
	return c.redial(respond)
}

// redial dials a new upstream in place of one that ended with nothing owed, and makes it the one
// requests are forwarded to. No lock is held while dialling: closeBoth must not wait for a dial.
func (c *proxyConn) redial(respond bool) error {
	if c.authenticated.Load() {
		return errUpstreamAuthenticated
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.p.opts.DialTimeout)
	defer cancel()
	conn, err := c.p.opts.Dial(ctx, "tcp", c.p.opts.Upstream)
	if err != nil {
		c.p.obs.UpstreamDialFailed()
		return fmt.Errorf("%w: %w", errRedial, err)
	}
	u := newUpstream(conn, c.p.opts.IdleTimeout)
	c.upMu.Lock()
	defer c.upMu.Unlock()
	select {
	case <-c.closed:
		// closeBoth ran, and closed the upstream that was newest then: this one is ours to close.
		_ = conn.Close()
		return fmt.Errorf("dialling the upstream again: %w", net.ErrClosed)
	default:
	}
	c.newest, c.upEnded, c.send = u, false, u
	if respond {
		c.forwardedOwed++
	}
	c.p.obs.UpstreamRedialed()
	c.p.log.V(1).Info("Connected to the upstream again", "remote", c.down.RemoteAddr().String(), "upstream", c.p.opts.Upstream)
	return nil
}

// forwardedAnswered counts a forwarded request's response read (or lost with the pair): called by the
// writer.
func (c *proxyConn) forwardedAnswered() {
	c.upMu.Lock()
	c.forwardedOwed--
	c.upMu.Unlock()
}

// upstreamEnded judges the end of the upstream the writer was watching with nothing queued. Either
// way the writer stops watching it. With a forwarded request owed (counted by the reader just before
// it queues it), that response is lost: the writer writes what is queued ahead of it, then meets the
// end again there (awaitUpstream) and closes the pair. With none, nothing the downstream awaits is
// lost: the downstream stays open, unless it authenticated through the upstream
// (errUpstreamAuthenticated), in which case the reader stops and the answers owed are written before
// the close.
func (c *proxyConn) upstreamEnded(err error) {
	c.upMu.Lock()
	idle := c.forwardedOwed == 0
	if idle {
		c.upEnded = true
	}
	c.upMu.Unlock()
	c.recvEnded = true
	if !idle {
		return
	}
	remote := c.down.RemoteAddr().String()
	_ = c.recv.conn.Close()
	if c.authenticated.Load() {
		c.p.log.V(1).Info("The upstream of an authenticated connection ended; closing the downstream after the answers owed",
			"remote", remote, "error", err.Error())
		c.stopReadingFor(closedUpstreamAuthenticated)
		return
	}
	c.p.obs.UpstreamIdleEnded()
	c.p.log.V(1).Info("The upstream connection ended with nothing owed; kept the downstream open", "remote", remote, "error", err.Error())
}

// followNewest makes the writer watch the upstream dialled after the one that ended, if there is
// one yet, and reports whether there is an upstream to watch.
func (c *proxyConn) followNewest() bool {
	if c.recvEnded {
		c.upMu.Lock()
		u, ended := c.newest, c.upEnded
		c.upMu.Unlock()
		if !ended {
			c.follow(u) // none yet, if u ended with a response owed: it is still the newest
		}
	}
	return !c.recvEnded
}

// follow makes the writer read u from now on: the upstream a forwarded request went to.
func (c *proxyConn) follow(u *upstream) {
	if u != c.recv {
		c.recv, c.recvEnded = u, false
	}
}
