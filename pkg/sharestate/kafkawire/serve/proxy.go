package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// ProxyOptions configure a Proxy. Store and Upstream are required; the rest have defaults.
type ProxyOptions struct {
	// Store answers the five share-state operations (API keys 83–87).
	Store sharestate.Store
	// Upstream is the address every other request is forwarded to: the broker's own listener.
	Upstream string
	// Dial connects to Upstream (default: a net.Dialer with DialTimeout).
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
	// DialTimeout bounds the connection to Upstream (default 10s); a failure closes the downstream
	// connection that needed it.
	DialTimeout time.Duration
	// MaxRequestBytes, MaxQueuedRequestBytes and RequestTimeout bound the requests answered here, as
	// the Server's options of the same names do. Forwarded requests are not bounded here: the
	// upstream applies its own socket.request.max.bytes.
	MaxRequestBytes       int32
	MaxQueuedRequestBytes int64
	RequestTimeout        time.Duration
	// RequireAuthentication answers keys 83–87 only on a connection whose SASL authentication the
	// upstream has accepted (a SaslAuthenticate response with no error), or whose TLS client
	// presented a certificate that was verified (a listener handing the proxy *tls.Conn connections
	// that require one); otherwise such a request
	// closes the connection, as a Kafka broker's SASL listener closes one that sends a request before
	// authenticating. Set it when the upstream listener is SASL: otherwise the proxy would answer
	// clients the broker would refuse. (SaslHandshake v0, after which SASL tokens travel without
	// Kafka's request header, is refused: the connection is closed.)
	RequireAuthentication bool
	// IdleTimeout (default 10m, Kafka's connections.max.idle.ms) closes a downstream connection that
	// has sent nothing and awaits nothing for this long, and bounds every write to either side and
	// the arrival of a request's bytes once it has begun: a peer that stops reading or sending mid-way
	// gets this long to resume, then the pair is closed, rather than holding the proxy forever.
	IdleTimeout time.Duration
	// MaxInFlightPerConnection bounds the requests of one connection forwarded or answered and not
	// yet responded to (default 1024); beyond it the proxy stops reading that connection.
	MaxInFlightPerConnection int
	// Logger receives what the proxy swallows (default: discard).
	Logger logr.Logger
	// Observer is told what the proxy does; ServerObserver what befalls the requests it answers
	// itself, as a Server's observer is (default: nothing is).
	Observer       ProxyObserver
	ServerObserver ServerObserver
}

func (o *ProxyOptions) setDefaults() error {
	if o.Upstream == "" {
		return errors.New("kafkawire: ProxyOptions.Upstream is required")
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = 10 * time.Second
	}
	if o.Dial == nil {
		d := &net.Dialer{Timeout: o.DialTimeout}
		o.Dial = d.DialContext
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.MaxInFlightPerConnection <= 0 {
		o.MaxInFlightPerConnection = 1024
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.Observer == nil {
		o.Observer = nopProxyObserver{}
	}
	return nil
}

// Proxy is a Kafka-protocol proxy in front of a broker: every request of a downstream connection is
// forwarded byte for byte on an upstream connection of its own, except the five share-state
// requests, which are answered from the Store, and ApiVersions, whose answer is forwarded with the
// share-state APIs' versions replaced by those served here. Responses leave in request order on
// each connection, as Kafka's clients require.
type Proxy struct {
	opts ProxyOptions
	log  logr.Logger
	obs  ProxyObserver
	// local answers the share-state requests: its decoding, store calls, byte budget and metrics.
	// It has no listener of its own.
	local *Server

	reg *registry[*proxyConn]
}

// NewProxy returns a Proxy; it fails only for options it cannot serve with.
func NewProxy(opts ProxyOptions) (*Proxy, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	local, err := NewServer(ServerOptions{
		Store: opts.Store, MaxRequestBytes: opts.MaxRequestBytes, MaxQueuedRequestBytes: opts.MaxQueuedRequestBytes,
		RequestTimeout: opts.RequestTimeout, Logger: opts.Logger, Observer: opts.ServerObserver,
	})
	if err != nil {
		return nil, err
	}
	return &Proxy{
		opts: opts, log: opts.Logger, obs: opts.Observer, local: local, reg: newRegistry[*proxyConn](),
	}, nil
}

// Serve accepts connections on ln until Shutdown, and then returns ErrServerClosed.
func (p *Proxy) Serve(ln net.Listener) error {
	return p.reg.serve(ln, p.log, p.start)
}

// start connects a new downstream connection to the upstream and serves it, on a goroutine of its
// own, unless the proxy is shutting down.
func (p *Proxy) start(down net.Conn) {
	if !p.reg.admit() {
		_ = down.Close()
		return
	}
	go func() {
		c, err := p.connect(down)
		if err != nil {
			p.reg.release()
			p.obs.UpstreamDialFailed()
			p.obs.ConnectionClosed(closedUpstreamDial)
			p.log.Info("Connecting to the upstream failed; closed the downstream connection",
				"remote", down.RemoteAddr().String(), "upstream", p.opts.Upstream, "error", err.Error())
			_ = down.Close()
			return
		}
		defer p.reg.done(c)
		p.obs.ConnectionOpened()
		p.obs.ConnectionClosed(c.serve())
	}()
}

// connect dials the upstream for down and registers the pair; a shutdown that began meanwhile
// refuses it.
func (p *Proxy) connect(down net.Conn) (*proxyConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), p.opts.DialTimeout)
	defer cancel()
	up, err := p.opts.Dial(ctx, "tcp", p.opts.Upstream)
	if err != nil {
		return nil, err
	}
	c := newProxyConn(p, down, up)
	if !p.reg.add(c) {
		c.closeBoth()
		return nil, errStopping
	}
	return c, nil
}

// Shutdown stops accepting connections and reading requests, and waits until every request already
// read is answered (by the upstream or here) and its connection closed. If ctx ends first, it
// cancels the requests answered here, closes every connection, and returns ctx's error once the
// connections are gone.
func (p *Proxy) Shutdown(ctx context.Context) error {
	// The local server holds no connections: its Shutdown only cancels the store calls in flight.
	cancelLocal := func() { _ = p.local.Shutdown(context.Background()) }
	if err := p.reg.shutdown(ctx, cancelLocal); err != nil {
		return fmt.Errorf("kafkawire: proxy shutdown cut short: %w", err)
	}
	return p.local.Shutdown(ctx)
}

// Serving reports whether the proxy accepts connections: between Serve and Shutdown.
func (p *Proxy) Serving() bool { return p.reg.serving() }
