// Package sidecar serves the share-state persister's five operations over Kafka's wire protocol, for
// the broker beside it in the pod: the framing (size-prefixed frames, request and response headers),
// per-connection pipelining with responses in request order, the dispatch of API keys 18 and 83–87 to
// a sharestate.Store, readiness and liveness, and the sidecar's metrics. In proxy mode it also serves
// serve.Proxy in front of the broker's own listener, on the same persister. Run wires it all
// together for cmd/sharestate-sidecar.
//
// Where the protocol leaves a choice, the server does what a Kafka broker does: an API key or version
// it does not serve closes the connection, except ApiVersions, which is answered at v0 with
// UNSUPPORTED_VERSION and the versions it does serve (KIP-511); so do a malformed request and a frame
// above the size limit. One connection's failure never touches another's.
package sidecar
