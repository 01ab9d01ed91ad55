// Package faultproxy is a TCP proxy for tests that breaks connections on purpose. It forwards bytes
// between its clients and one loopback target unchanged, so TLS passes through end to end, and it
// can close every open connection at once (DropAll) or close each connection after a random number
// of bytes or a random lifetime (Faults), so that requests die mid-flight.
package faultproxy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// dialTimeout bounds the proxy's connection to the target.
const dialTimeout = 5 * time.Second

// Faults say when the proxy closes a connection by itself. Each connection draws its own limits
// when it is accepted, uniformly from the ranges; the zero value closes nothing.
type Faults struct {
	// MinBytes and MaxBytes bound the bytes a connection forwards, both directions together, before
	// the proxy closes it. The last chunk is cut at the limit. 0 for both: no limit.
	MinBytes, MaxBytes int64
	// MinLifetime and MaxLifetime bound how long a connection lives before the proxy closes it. 0 for
	// both: no limit.
	MinLifetime, MaxLifetime time.Duration
}

func (f Faults) validate() error {
	if f.MinBytes < 0 || f.MaxBytes < f.MinBytes {
		return fmt.Errorf("faultproxy: byte limits [%d, %d] are not a range", f.MinBytes, f.MaxBytes)
	}
	if f.MinLifetime < 0 || f.MaxLifetime < f.MinLifetime {
		return fmt.Errorf("faultproxy: lifetimes [%v, %v] are not a range", f.MinLifetime, f.MaxLifetime)
	}
	return nil
}

// Options configure a Proxy.
type Options struct {
	// Target is the host:port the proxy forwards to. The host must be a loopback address or
	// "localhost": the proxy is for tests and never reaches beyond the machine.
	Target string
	// Seed seeds the random draws of the limits, so that a run can be repeated.
	Seed uint64
	// Faults apply to every connection accepted until SetFaults changes them.
	Faults Faults
}

// Stats count what the proxy did.
type Stats struct {
	// Accepted counts the connections accepted.
	Accepted int64
	// Dropped counts the connections the proxy closed by itself (DropAll, a byte or lifetime limit),
	// not those that one end closed.
	Dropped int64
	// Open is the number of connections open now.
	Open int
}

// Proxy is a running proxy. Its methods are safe for concurrent use.
type Proxy struct {
	target   string
	listener net.Listener
	// dialCtx is cancelled by Close, which ends the dials still in progress.
	dialCtx    context.Context
	cancelDial context.CancelFunc
	wg         sync.WaitGroup
	closeOnce  sync.Once
	accepted   atomic.Int64
	dropped    atomic.Int64

	mu     sync.Mutex
	rng    *rand.Rand
	faults Faults
	links  map[*link]struct{}
	closed bool
}

// New starts a proxy listening on 127.0.0.1 at a free port (see Addr).
func New(opts Options) (*Proxy, error) {
	if err := checkLoopback(opts.Target); err != nil {
		return nil, err
	}
	if err := opts.Faults.validate(); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listening: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{
		target:     opts.Target,
		listener:   l,
		dialCtx:    ctx,
		cancelDial: cancel,
		rng:        rand.New(rand.NewPCG(opts.Seed, opts.Seed^0x9e3779b97f4a7c15)),
		faults:     opts.Faults,
		links:      make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

func checkLoopback(target string) error {
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("faultproxy: target %q is not a loopback address", target)
}

// Addr is the address the proxy listens on, as host:port.
func (p *Proxy) Addr() string { return p.listener.Addr().String() }

// SetFaults replaces the faults; they apply to the connections accepted from now on.
func (p *Proxy) SetFaults(f Faults) error {
	if err := f.validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
	return nil
}

// DropAll closes every open connection now, both towards the client and towards the target, and
// returns how many it closed.
func (p *Proxy) DropAll() int {
	p.mu.Lock()
	open := make([]*link, 0, len(p.links))
	for l := range p.links {
		open = append(open, l)
	}
	p.mu.Unlock()
	n := 0
	for _, l := range open {
		if l.drop(&p.dropped) {
			n++
		}
	}
	return n
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	open := len(p.links)
	p.mu.Unlock()
	return Stats{Accepted: p.accepted.Load(), Dropped: p.dropped.Load(), Open: open}
}

// Close stops accepting, closes every connection and returns once all of the proxy's goroutines
// have ended. It may be called more than once.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		open := make([]*link, 0, len(p.links))
		for l := range p.links {
			open = append(open, l)
		}
		p.mu.Unlock()
		err = p.listener.Close()
		p.cancelDial()
		for _, l := range open {
			l.close()
		}
		p.wg.Wait()
	})
	return err
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A failed accept (out of file descriptors, an aborted handshake) ends only that connection.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.accepted.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve connects one client to the target and forwards until either end closes or the proxy
// drops the connection.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	dialer := net.Dialer{Timeout: dialTimeout}
	server, err := dialer.DialContext(p.dialCtx, "tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	l, ok := p.register(client, server)
	if !ok {
		return
	}
	var copies sync.WaitGroup
	copies.Add(2)
	go func() { defer copies.Done(); p.forward(l, server, client) }()
	go func() { defer copies.Done(); p.forward(l, client, server) }()
	copies.Wait()
	l.stopTimer()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// register records a new connection pair and draws its limits; it reports false, having closed
// both, when the proxy is closing.
func (p *Proxy) register(client, server net.Conn) (*link, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := &link{client: client, server: server, budget: -1}
	if p.closed {
		l.close()
		return nil, false
	}
	f := p.faults
	if f.MaxBytes > 0 {
		l.budget = f.MinBytes + p.rng.Int64N(f.MaxBytes-f.MinBytes+1)
	}
	if f.MaxLifetime > 0 {
		life := f.MinLifetime + time.Duration(p.rng.Int64N(int64(f.MaxLifetime-f.MinLifetime)+1))
		l.timer = time.AfterFunc(life, func() { l.drop(&p.dropped) })
	}
	p.links[l] = struct{}{}
	return l, true
}

// forward copies src to dst within the link's byte budget; when the budget runs out it forwards
// what fits and closes the link. When src ends or fails, or dst fails, it closes the link too: the
// proxy does not half-close.
func (p *Proxy) forward(l *link, dst, src net.Conn) {
	defer l.close()
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			allowed, exhausted := l.spend(int64(n))
			if allowed > 0 {
				if _, werr := dst.Write(buf[:allowed]); werr != nil {
					return
				}
			}
			if exhausted {
				l.drop(&p.dropped)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// link is one client connection and its connection to the target.
type link struct {
	client, server net.Conn
	timer          *time.Timer

	mu     sync.Mutex
	budget int64 // bytes left to forward; -1: no limit
	closed bool
}

// spend takes up to n bytes from the budget: it returns how many may be forwarded and whether the
// budget is now used up.
func (l *link) spend(n int64) (allowed int64, exhausted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.budget < 0 {
		return n, false
	}
	allowed = min(n, l.budget)
	l.budget -= allowed
	return allowed, l.budget == 0
}

// close closes both connections, if they are still open.
func (l *link) close() { l.drop(nil) }

// drop closes both connections and, if this call closed them, counts it in dropped (when not nil)
// before either end can notice.
func (l *link) drop(dropped *atomic.Int64) bool {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return false
	}
	l.closed = true
	l.mu.Unlock()
	if dropped != nil {
		dropped.Add(1)
	}
	_ = l.client.Close()
	_ = l.server.Close()
	return true
}

func (l *link) stopTimer() {
	if l.timer != nil {
		l.timer.Stop()
	}
}
