package serve

import (
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// ServerObserver is told what a Server does, as kgo's hooks are: the sidecar turns it into its
// sharestate_sidecar_* metrics. Its methods are called concurrently from the goroutines that serve
// connections, so they must be safe for that, quick, and never block. Every string argument has a
// small, fixed set of values: Kafka's API names ("Unknown" for a key kmsg does not know) and the
// connection-closed reasons of this package.
type ServerObserver interface {
	// ConnectionOpened is a connection accepted; ConnectionClosed is its end and why.
	ConnectionOpened()
	ConnectionClosed(reason string)
	// RequestRead is a request read off a connection; RequestWritten is its response written (or,
	// the connection having failed, dropped).
	RequestRead()
	RequestWritten()
	// RequestCounted is a request's outcome: NONE, the first error a partition was answered with,
	// or the error a refused request was closed with (UNSUPPORTED_VERSION, INVALID_REQUEST).
	RequestCounted(api string, code sharestate.ErrorCode)
	// RequestServed is the time from a request's arrival to its response being ready, not counting
	// the wait for earlier responses on its connection.
	RequestServed(api string, took time.Duration)
}

// The routes of ProxyObserver.Request.
const (
	RouteForwarded = "forwarded" // forwarded to the upstream broker
	RouteAnswered  = "answered"  // a share-state request, answered by the proxy itself
)

// The reasons of ProxyObserver.APIVersionsUnrewritten (errAPIVersionsUndecodable,
// errAPIVersionsErrorCode).
const (
	unrewrittenUndecodable = "undecodable"
	unrewrittenErrorCode   = "error_response"
)

// ProxyObserver is told what a Proxy does (the sidecar's sharestate_proxy_* metrics), with the
// rules of ServerObserver. The requests the proxy answers itself are told to the ServerObserver of
// its options.
type ProxyObserver interface {
	// ConnectionOpened is a downstream connection paired with its upstream; ConnectionClosed is the
	// pair's end and why.
	ConnectionOpened()
	ConnectionClosed(reason string)
	// Request is a request by API key and route (RouteForwarded, RouteAnswered).
	Request(key int16, route string)
	// RequestRead is a request read off a downstream connection; RequestWritten is its response
	// written back (or dropped with its connection).
	RequestRead()
	RequestWritten()
	// BytesToUpstream and BytesFromUpstream are bytes of forwarded requests and of their responses.
	BytesToUpstream(n int64)
	BytesFromUpstream(n int64)
	// UpstreamDialFailed is a failed connection to the upstream (it closes the downstream that
	// needed it). UpstreamIdleEnded is an upstream that ended with nothing owed while its downstream
	// stayed open; UpstreamRedialed is one dialled again for a forwarded request after such an end.
	UpstreamDialFailed()
	UpstreamIdleEnded()
	UpstreamRedialed()
	// APIVersionsUnrewritten is an upstream ApiVersions response forwarded without the share-state
	// versions served here: "undecodable", or "error_response" (such as KIP-511's fallback).
	APIVersionsUnrewritten(reason string)
}

// nopServerObserver and nopProxyObserver observe nothing: what the options default to.
type (
	nopServerObserver struct{}
	nopProxyObserver  struct{}
)

func (nopServerObserver) ConnectionOpened()                           {}
func (nopServerObserver) ConnectionClosed(string)                     {}
func (nopServerObserver) RequestRead()                                {}
func (nopServerObserver) RequestWritten()                             {}
func (nopServerObserver) RequestCounted(string, sharestate.ErrorCode) {}
func (nopServerObserver) RequestServed(string, time.Duration)         {}

func (nopProxyObserver) ConnectionOpened()             {}
func (nopProxyObserver) ConnectionClosed(string)       {}
func (nopProxyObserver) Request(int16, string)         {}
func (nopProxyObserver) RequestRead()                  {}
func (nopProxyObserver) RequestWritten()               {}
func (nopProxyObserver) BytesToUpstream(int64)         {}
func (nopProxyObserver) BytesFromUpstream(int64)       {}
func (nopProxyObserver) UpstreamDialFailed()           {}
func (nopProxyObserver) UpstreamIdleEnded()            {}
func (nopProxyObserver) UpstreamRedialed()             {}
func (nopProxyObserver) APIVersionsUnrewritten(string) {}
