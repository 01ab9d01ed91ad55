package serve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/semaphore"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// ServerOptions configure a Server. Store is required; the rest have defaults.
type ServerOptions struct {
	// Store answers the five operations.
	Store sharestate.Store
	// MaxRequestBytes bounds one request frame (default DefaultMaxRequestBytes, 8 MiB, whose
	// comment shows why that is enough); a larger one closes its connection, and only that one.
	MaxRequestBytes int32
	// MaxQueuedRequestBytes bounds the request bytes the server holds at once, over all connections
	// (default 4 × MaxRequestBytes; never below MaxRequestBytes), as Kafka's queued.max.request.bytes
	// does. A request counts from its size field, before its bytes are read, until it is answered;
	// beyond the bound, readers wait. Its bytes must arrive within RequestTimeout (or IdleTimeout, if
	// shorter) of its size field, so a slow sender holds its share no longer than that.
	MaxQueuedRequestBytes int64
	// IdleTimeout closes a connection that has neither sent a request nor awaited a response for this
	// long (default 10m, Kafka's connections.max.idle.ms).
	IdleTimeout time.Duration
	// RequestTimeout bounds the store's work on one request (default 30s, Kafka's request.timeout.ms,
	// after which the broker's client stops waiting anyway): the context the store gets ends then,
	// and the partitions still in progress are answered COORDINATOR_NOT_AVAILABLE.
	RequestTimeout time.Duration
	// MaxInFlightPerConnection bounds the requests of one connection read and not yet answered
	// (default 1024); beyond it the server stops reading that connection until it catches up.
	MaxInFlightPerConnection int
	// Logger receives what the server swallows: refused requests, closed connections (default: discard).
	Logger logr.Logger
	// Observer is told what the server does (default: nothing is).
	Observer ServerObserver
}

func (o *ServerOptions) setDefaults() error {
	if o.Store == nil {
		return errors.New("sidecar: ServerOptions.Store is required")
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = kafkawire.DefaultMaxRequestBytes
	}
	if o.MaxQueuedRequestBytes <= 0 {
		o.MaxQueuedRequestBytes = 4 * int64(o.MaxRequestBytes)
	}
	// Below one frame's worth, a frame of the largest size could never be read.
	o.MaxQueuedRequestBytes = max(o.MaxQueuedRequestBytes, int64(o.MaxRequestBytes))
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 10 * time.Minute
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 30 * time.Second
	}
	if o.MaxInFlightPerConnection <= 0 {
		o.MaxInFlightPerConnection = 1024
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.Observer == nil {
		o.Observer = nopServerObserver{}
	}
	return nil
}

// ErrServerClosed is what Serve returns once Shutdown has begun.
var ErrServerClosed = errors.New("sidecar: server closed")

// Server serves Kafka's wire protocol on the listeners given to Serve.
type Server struct {
	opts ServerOptions
	log  logr.Logger
	obs  ServerObserver

	// ctx is every request's context. It is not cancelled by a graceful shutdown, which lets requests
	// in flight finish; only when the shutdown's deadline passes is it cancelled.
	ctx    context.Context
	cancel context.CancelFunc

	// queued is the budget of request bytes held at once (MaxQueuedRequestBytes).
	queued *semaphore.Weighted

	reg *registry[*conn]
}

// NewServer returns a Server; it fails only for options it cannot serve with.
func NewServer(opts ServerOptions) (*Server, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		opts: opts, log: opts.Logger, obs: opts.Observer, ctx: ctx, cancel: cancel,
		queued: semaphore.NewWeighted(opts.MaxQueuedRequestBytes), reg: newRegistry[*conn](),
	}, nil
}

// Serve accepts connections on ln until Shutdown, and then returns ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	return s.reg.serve(ln, s.log, s.start)
}

// start serves a new connection, unless the server is shutting down.
func (s *Server) start(nc net.Conn) {
	if !s.reg.admit() {
		_ = nc.Close()
		return
	}
	c := newConn(s, nc)
	if !s.reg.add(c) {
		_ = nc.Close()
		s.reg.release()
		return
	}
	s.obs.ConnectionOpened()
	go func() {
		defer s.reg.done(c)
		s.obs.ConnectionClosed(c.serve())
	}()
}

// Shutdown stops accepting connections and reading requests, and waits until every request already
// read is answered and its connection closed. If ctx ends first, it cancels the requests still in
// flight (the store answers them COORDINATOR_NOT_AVAILABLE), closes every connection, and returns
// ctx's error once the connections are gone.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.reg.shutdown(ctx, s.cancel)
	s.cancel()
	if err != nil {
		return fmt.Errorf("sidecar: shutdown cut short: %w", err)
	}
	return nil
}

// Serving reports whether the server accepts connections: between Serve and Shutdown.
func (s *Server) Serving() bool { return s.reg.serving() }
