package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// registered is a connection a registry serves: stopReading lets it answer what it has read and then
// close; closeNow closes it at once.
type registered interface {
	comparable
	stopReading()
	closeNow()
}

// registry is what the Server and the Proxy share of their life cycle: the listeners they accept on,
// the connections they serve, and the shutdown that stops the first and drains the second.
type registry[C registered] struct {
	closing   atomic.Bool
	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[C]struct{}
	wg        sync.WaitGroup // one per connection, from its admission until it is served
}

func newRegistry[C registered]() *registry[C] {
	return &registry[C]{listeners: map[net.Listener]struct{}{}, conns: map[C]struct{}{}}
}

// serve accepts connections on ln and hands each to start, until a shutdown closes ln (then it
// returns ErrServerClosed) or ln fails.
func (r *registry[C]) serve(ln net.Listener, log logr.Logger, start func(net.Conn)) error {
	r.mu.Lock()
	if r.closing.Load() {
		r.mu.Unlock()
		_ = ln.Close()
		return ErrServerClosed
	}
	r.listeners[ln] = struct{}{}
	r.mu.Unlock()
	backoff := time.Duration(0)
	for {
		nc, err := ln.Accept()
		if err != nil {
			if r.closing.Load() {
				return ErrServerClosed
			}
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("sidecar: accepting connections: %w", err)
			}
			// Out of file descriptors, say: wait and try again rather than give up serving.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			log.Error(err, "Accepting a connection failed", "retryIn", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		start(nc)
	}
}

// admit counts a connection about to be served, unless a shutdown has begun; the caller calls done
// once it is served. A connection that must be set up first (the proxy dials its upstream) is added
// by add once it is.
func (r *registry[C]) admit() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing.Load() {
		return false
	}
	r.wg.Add(1)
	return true
}

// add registers an admitted connection, so that a shutdown can reach it, unless a shutdown has
// begun meanwhile.
func (r *registry[C]) add(c C) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closing.Load() {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// done ends an added connection once it is served.
func (r *registry[C]) done(c C) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
	r.wg.Done()
}

// release ends an admitted connection that was never added.
func (r *registry[C]) release() { r.wg.Done() }

// shutdown stops accepting connections and reading requests, and waits until every connection has
// answered what it read and closed. If ctx ends first, it calls cutShort (to cancel the work in
// flight), closes every connection at once, waits for them, and returns ctx's error.
func (r *registry[C]) shutdown(ctx context.Context, cutShort func()) error {
	r.mu.Lock()
	r.closing.Store(true)
	for ln := range r.listeners {
		_ = ln.Close()
	}
	for c := range r.conns {
		c.stopReading()
	}
	r.mu.Unlock()

	drained := make(chan struct{})
	go func() { r.wg.Wait(); close(drained) }()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
	}
	cutShort()
	r.mu.Lock()
	for c := range r.conns {
		c.closeNow()
	}
	r.mu.Unlock()
	<-drained
	return ctx.Err()
}

// serving reports whether connections are accepted: between the first serve and shutdown.
func (r *registry[C]) serving() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.closing.Load() && len(r.listeners) > 0
}
