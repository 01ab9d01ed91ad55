package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// DefaultAddress is where the sidecar listens unless told otherwise: loopback, beside the broker.
const DefaultAddress = "127.0.0.1:9089"

// ClientOptions configure a Client. Every field has a default.
type ClientOptions struct {
	// Address is the sidecar's host:port (default DefaultAddress).
	Address string
	// Connections is the size of the connection pool (default 4). Each connection pipelines: a
	// request does not wait for the one before it, but answers leave in request order, so a slow
	// partition (a status update retried until the persister's operation timeout) delays the answers
	// behind it on its connection. A request goes to the connection with the fewest requests in flight,
	// which steers traffic away from a connection stuck behind a slow answer.
	Connections int
	// MaxInFlightPerConnection bounds the requests written to one connection and not answered yet
	// (default 1024); beyond it, requests queue in the client.
	MaxInFlightPerConnection int
	// RequestTimeout bounds a request whose context has no deadline (default 30s, above the
	// persister's own 15s bound on an operation, so that its answer is seen rather than a timeout).
	RequestTimeout time.Duration
	// DialTimeout bounds connecting and the ApiVersions handshake (default 5s).
	DialTimeout time.Duration
	// IdleTimeout closes a connection unused this long before its next request rather than send on
	// it (default 9m: below the sidecar's 10m, as Kafka's clients stay below its brokers', so that a
	// request never races the sidecar closing the connection as idle).
	IdleTimeout time.Duration
	// MaxResponseBytes bounds one response (default DefaultMaxResponseBytes, more than the sidecar's
	// DefaultMaxRequestBytes: a Read's response carries the batches of every partition it names).
	MaxResponseBytes int32
	// ClientID is sent in every request header (default "sharestate-kafkawire").
	ClientID string
	// Dial connects to Address (default: a net.Dialer's DialContext); tests put faults in it.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

func (o *ClientOptions) setDefaults() error {
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if _, _, err := net.SplitHostPort(o.Address); err != nil {
		return fmt.Errorf("kafkawire: address %q: %w", o.Address, err)
	}
	o.Connections = orDefault(o.Connections, 4)
	o.MaxInFlightPerConnection = orDefault(o.MaxInFlightPerConnection, 1024)
	o.RequestTimeout = orDefault(o.RequestTimeout, 30*time.Second)
	o.DialTimeout = orDefault(o.DialTimeout, 5*time.Second)
	o.IdleTimeout = orDefault(o.IdleTimeout, 9*time.Minute)
	o.MaxResponseBytes = orDefault(o.MaxResponseBytes, DefaultMaxResponseBytes)
	if o.ClientID == "" {
		o.ClientID = "sharestate-kafkawire"
	}
	if o.Dial == nil {
		var d net.Dialer
		o.Dial = d.DialContext
	}
	return nil
}

func orDefault[T int | int32 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// Client is a sharestate.Store that reaches a sidecar over Kafka's wire protocol. It is safe for
// concurrent use. It never fails a call as a whole: like the persister, it answers every partition,
// and an error reaching the sidecar (refused, broken or timed-out connection, garbled response) is
// answered COORDINATOR_NOT_AVAILABLE for each, which Kafka's callers retry.
type Client struct {
	opts      ClientOptions
	formatter *kmsg.RequestFormatter
	slots     []connSlot
	next      atomic.Uint64
	ctx       context.Context // ends with Close; ends every connection
	cancel    context.CancelFunc
}

var _ sharestate.Store = (*Client)(nil)

var (
	// errClosed is what a call on a closed Client runs into.
	errClosed = errors.New("kafkawire: client closed")
	// errIdle closes a connection unused for IdleTimeout.
	errIdle = errors.New("kafkawire: connection idle")
)

// NewClient returns a Client. It connects lazily: the first request on each pooled connection dials.
func NewClient(opts ClientOptions) (*Client, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	return &Client{
		opts: opts, formatter: kmsg.NewRequestFormatter(kmsg.FormatterClientID(opts.ClientID)),
		slots: make([]connSlot, opts.Connections), ctx: ctx, cancel: func() { cancel(errClosed) },
	}, nil
}

// Close closes every connection; calls in flight are answered COORDINATOR_NOT_AVAILABLE.
func (c *Client) Close() error {
	c.cancel()
	for i := range c.slots {
		c.slots[i].close()
	}
	return nil
}

// connSlot is one connection of the pool, dialled again once it broke.
type connSlot struct {
	mu       sync.Mutex
	conn     *wireConn
	inFlight atomic.Int64 // requests sent through this slot and not answered yet
}

func (s *connSlot) get(ctx context.Context, c *Client) (*wireConn, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && s.conn.alive() && !s.conn.idleFor(c.opts.IdleTimeout) {
		return s.conn, nil
	}
	if s.conn != nil {
		s.conn.kill(errIdle)
	}
	if err := context.Cause(c.ctx); err != nil {
		return nil, err
	}
	conn, err := dial(ctx, c.ctx, c.opts)
	if err != nil {
		return nil, err
	}
	s.conn = conn
	return conn, nil
}

func (s *connSlot) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil {
		s.conn.kill(errClosed)
	}
}

// pick returns the slot with the fewest requests in flight, looking from a different slot each time
// so that ties are spread.
func (c *Client) pick() *connSlot {
	n := uint64(len(c.slots))
	start := c.next.Add(1)
	best := &c.slots[start%n]
	for i := uint64(1); i < n; i++ {
		if s := &c.slots[(start+i)%n]; s.inFlight.Load() < best.inFlight.Load() {
			best = s
		}
	}
	return best
}

// unsupportedError says the sidecar does not serve an API at any version this client speaks.
type unsupportedError struct{ key int16 }

func (e unsupportedError) Error() string {
	return fmt.Sprintf("kafkawire: the sidecar does not serve API key %d at a version this client speaks", e.key)
}

// exchange sends a request built by encode (given the negotiated version) and decodes the response.
func (c *Client) exchange(ctx context.Context, key int16, encode func(version int16) kmsg.Request) (kmsg.Response, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.RequestTimeout)
		defer cancel()
	}
	slot := c.pick()
	slot.inFlight.Add(1)
	defer slot.inFlight.Add(-1)
	conn, err := slot.get(ctx, c)
	if err != nil {
		return nil, err
	}
	version, ok := conn.versions[key]
	if !ok {
		return nil, unsupportedError{key: key}
	}
	req := encode(version)
	frame := c.formatter.AppendRequest(nil, req, 0) // the connection's writer sets the correlation id
	body, err := conn.roundTrip(ctx, frame)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	if err := resp.ReadFrom(body); err != nil {
		// The stream is framed correctly but this message is not what it claims: trust nothing more
		// from this connection.
		conn.kill(fmt.Errorf("kafkawire: decoding a response to API key %d v%d: %w", key, version, err))
		return nil, fmt.Errorf("kafkawire: decoding a response to API key %d v%d: %w", key, version, err)
	}
	return resp, nil
}

// codeOf maps an error of exchange to the code every partition is answered with.
func codeOf(err error) sharestate.ErrorCode {
	var unsupported unsupportedError
	if errors.As(err, &unsupported) {
		return sharestate.ErrUnsupportedVersion
	}
	return sharestate.ErrCoordinatorNotAvailable
}
