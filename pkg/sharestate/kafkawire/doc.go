// Package kafkawire carries the share-state persister's five operations over Kafka's wire protocol
// (API keys 83–87, semantics §2), both ways: Server answers them from any sharestate.Store (the
// sidecar gives it the Kubernetes-backed persister), and Client is a sharestate.Store that reaches
// such a server over TCP. One table describes the five operations for both (ops.go: API key, kmsg
// types, conversions, the Store method); headers (header.go) and frames (frame.go) are written once;
// apis.go holds the versions spoken. Proxy sits in front of a Kafka broker: it forwards every
// request byte for byte on an upstream connection of its own, answers keys 83–87 itself from a
// Store, rewrites ApiVersions to advertise them, and keeps each connection's responses in request
// order (proxy*.go). It imports nothing of Kubernetes.
//
// The encodings themselves are franz-go's kmsg; nothing here writes a message field by hand.
package kafkawire
