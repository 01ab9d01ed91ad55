package kafkawire

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// wireConn is one pipelined connection to the sidecar. Callers hand requests to its writer goroutine,
// which numbers them (correlation ids) in the order it writes them and queues them as in flight; its
// reader goroutine matches each response to the oldest request in flight, since Kafka answers a
// connection's requests in order. Any protocol error kills the connection and fails everything on it.
type wireConn struct {
	nc       net.Conn
	versions map[int16]int16 // per API key, the version both sides speak; fixed by the handshake
	opts     *ClientOptions

	queue    chan *pending // to the writer
	inflight chan *pending // written, awaiting a response, oldest first

	lastUsed atomic.Int64 // unix nanoseconds of the last request sent

	once sync.Once
	dead chan struct{} // closed by kill
	err  error         // why the connection died; set before dead is closed
}

// pending is one request on its way.
type pending struct {
	ctx    context.Context
	frame  []byte // the whole request, size field included; the writer fills in the correlation id
	corrID int32
	done   chan []byte // the response body (after the response header); buffered, never blocks
}

// dial connects, agrees on versions with ApiVersions, and starts the connection's goroutines. life
// ends the connection when it ends (the client's Close).
func dial(ctx, life context.Context, opts ClientOptions) (*wireConn, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
	defer cancel()
	nc, err := opts.Dial(ctx, "tcp", opts.Address)
	if err != nil {
		return nil, fmt.Errorf("kafkawire: connecting to the sidecar at %s: %w", opts.Address, err)
	}
	versions, err := handshake(ctx, nc, &opts)
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("kafkawire: ApiVersions with the sidecar at %s: %w", opts.Address, err)
	}
	c := &wireConn{
		nc: nc, versions: versions, opts: &opts,
		queue:    make(chan *pending, opts.MaxInFlightPerConnection),
		inflight: make(chan *pending, opts.MaxInFlightPerConnection),
		dead:     make(chan struct{}),
	}
	c.lastUsed.Store(time.Now().UnixNano())
	go c.writeLoop()
	go c.readLoop()
	stop := context.AfterFunc(life, func() { c.kill(context.Cause(life)) })
	go func() { <-c.dead; stop() }()
	return c, nil
}

func (c *wireConn) alive() bool {
	select {
	case <-c.dead:
		return false
	default:
		return true
	}
}

// idleFor reports whether no request was sent for d.
func (c *wireConn) idleFor(d time.Duration) bool {
	return time.Since(time.Unix(0, c.lastUsed.Load())) >= d
}

// kill closes the connection for good; the first reason sticks.
func (c *wireConn) kill(err error) {
	c.once.Do(func() {
		c.err = err
		close(c.dead)
		_ = c.nc.Close()
	})
}

// roundTrip sends a request frame and waits for its response body, the connection's death or ctx.
func (c *wireConn) roundTrip(ctx context.Context, frame []byte) ([]byte, error) {
	c.lastUsed.Store(time.Now().UnixNano())
	p := &pending{ctx: ctx, frame: frame, done: make(chan []byte, 1)}
	select {
	case c.queue <- p:
	case <-c.dead:
		return nil, c.err
	case <-ctx.Done():
		return nil, fmt.Errorf("kafkawire: waiting to send to the sidecar: %w", ctx.Err())
	}
	select {
	case body := <-p.done:
		return body, nil
	case <-c.dead:
		select { // a response that arrived just before the connection died still counts
		case body := <-p.done:
			return body, nil
		default:
			return nil, c.err
		}
	case <-ctx.Done():
		// The sidecar may still carry the request out; the caller is told it does not know.
		return nil, fmt.Errorf("kafkawire: waiting for the sidecar's answer: %w", ctx.Err())
	}
}

// writeLoop writes queued requests in order, flushing whenever the queue runs dry, so a burst of
// requests from many callers goes out in few writes.
func (c *wireConn) writeLoop() {
	w := bufio.NewWriterSize(c.nc, 64<<10)
	corrID := int32(1) // 0 was the handshake's
	for {
		var p *pending
		select {
		case p = <-c.queue:
		case <-c.dead:
			return
		}
		if p.ctx.Err() != nil {
			continue // its caller has gone: do not send what nobody waits for
		}
		p.corrID = corrID
		corrID++
		binary.BigEndian.PutUint32(p.frame[8:12], uint32(p.corrID))
		select {
		case c.inflight <- p: // before the write, so the reader always finds it
		case <-c.dead:
			return
		}
		if _, err := w.Write(p.frame); err != nil {
			c.kill(fmt.Errorf("kafkawire: writing to the sidecar: %w", err))
			return
		}
		if len(c.queue) == 0 {
			// Callers woken together by one burst of answers send together: let those already
			// runnable queue their requests before this write goes out, so a burst costs one
			// syscall rather than one per request.
			runtime.Gosched()
		}
		if len(c.queue) == 0 {
			if err := c.flush(w); err != nil {
				c.kill(fmt.Errorf("kafkawire: writing to the sidecar: %w", err))
				return
			}
		}
	}
}

// flush writes out w, giving up after RequestTimeout: a sidecar that stops reading must not hold the
// writer forever.
func (c *wireConn) flush(w *bufio.Writer) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.opts.RequestTimeout))
	return w.Flush()
}

// readLoop hands each response to the oldest request in flight.
func (c *wireConn) readLoop() {
	r := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		frame, err := ReadFrame(r, c.opts.MaxResponseBytes)
		if err != nil {
			c.kill(fmt.Errorf("kafkawire: reading from the sidecar: %w", err))
			return
		}
		var p *pending
		select {
		case p = <-c.inflight:
		default:
			c.kill(errors.New("kafkawire: the sidecar sent a response to no request"))
			return
		}
		body, err := responseBody(frame, p.corrID, true)
		if err != nil {
			c.kill(err)
			return
		}
		p.done <- body
	}
}

// clientSoftware is what the handshake tells the sidecar about this client (KIP-511); both fields
// must match Kafka's pattern [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?.
const (
	clientSoftwareName    = "sharestate-kafkawire"
	clientSoftwareVersion = "1"
)

// handshake sends ApiVersions at the highest version this package speaks, falling back to the
// version the sidecar names if it answers UNSUPPORTED_VERSION (KIP-511), and returns, per API key,
// the highest version both speak.
func handshake(ctx context.Context, nc net.Conn, opts *ClientOptions) (map[int16]int16, error) {
	resp, err := peerAPIVersions(ctx, nc, opts)
	if err != nil {
		return nil, err
	}
	return negotiate(resp.ApiKeys), nil
}

// peerAPIVersions sends ApiVersions at the highest version this package speaks, falling back to the
// version the peer names if it answers UNSUPPORTED_VERSION (KIP-511), and returns the peer's answer
// without an error code.
func peerAPIVersions(ctx context.Context, nc net.Conn, opts *ClientOptions) (*kmsg.ApiVersionsResponse, error) {
	if deadline, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(deadline)
		defer func() { _ = nc.SetDeadline(time.Time{}) }()
	}
	api, _ := LookupAPI(KeyAPIVersions)
	version := api.MaxVersion
	for range 2 {
		resp, err := apiVersions(nc, version, opts)
		if err != nil {
			return nil, err
		}
		if resp.ErrorCode == 0 {
			return resp, nil
		}
		fallback, ok := unsupportedFallback(resp, version)
		if !ok {
			return nil, fmt.Errorf("ApiVersions v%d answered error code %d", version, resp.ErrorCode)
		}
		version = fallback
	}
	return nil, errors.New("ApiVersions: the peer refused the version it asked for")
}

// unsupportedFallback returns the version to retry ApiVersions with after UNSUPPORTED_VERSION: the
// sidecar's maximum, if it is below the one just refused.
func unsupportedFallback(resp *kmsg.ApiVersionsResponse, refused int16) (int16, bool) {
	if resp.ErrorCode != int16(sharestate.ErrUnsupportedVersion) {
		return 0, false
	}
	for _, k := range resp.ApiKeys {
		if k.ApiKey == KeyAPIVersions && k.MaxVersion >= 0 && k.MaxVersion < refused {
			return k.MaxVersion, true
		}
	}
	return 0, false
}

// apiVersions sends one ApiVersions request and reads its response, whose header is always v0 and
// whose body is v0 when the sidecar refused the version.
func apiVersions(nc net.Conn, version int16, opts *ClientOptions) (*kmsg.ApiVersionsResponse, error) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = version
	req.ClientSoftwareName, req.ClientSoftwareVersion = clientSoftwareName, clientSoftwareVersion
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(opts.ClientID)).AppendRequest(nil, req, 0)
	if _, err := nc.Write(frame); err != nil {
		return nil, err
	}
	raw, err := ReadFrame(nc, opts.MaxResponseBytes) // unbuffered: nothing may be read past this response
	if err != nil {
		return nil, err
	}
	body, err := responseBody(raw, 0, false)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if len(body) >= 2 && int16(binary.BigEndian.Uint16(body)) == int16(sharestate.ErrUnsupportedVersion) {
		resp.Version = 0
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding the response: %w", err)
	}
	return resp, nil
}

// negotiate picks, per API key, the highest version both the sidecar and this package speak.
func negotiate(keys []kmsg.ApiVersionsResponseApiKey) map[int16]int16 {
	versions := map[int16]int16{}
	for _, k := range keys {
		ours, ok := LookupAPI(k.ApiKey)
		if !ok {
			continue
		}
		top := min(ours.MaxVersion, k.MaxVersion)
		if top >= max(ours.MinVersion, k.MinVersion) {
			versions[k.ApiKey] = top
		}
	}
	return versions
}
