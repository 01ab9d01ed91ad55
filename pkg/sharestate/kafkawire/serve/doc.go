// Package serve answers the share-state requests of package kafkawire from any sharestate.Store
// (the sidecar gives it the Kubernetes-backed persister). Server listens for them. Proxy sits in
// front of a Kafka broker: it forwards every request byte for byte on an upstream connection of its
// own, answers keys 83–87 itself from a Store, rewrites ApiVersions to advertise them, and keeps each
// connection's responses in request order (proxy*.go).
//
// Both report what they do to an observer of their options (ServerObserver, ProxyObserver), which
// the sidecar turns into its Prometheus metrics; the package imports nothing of Kubernetes or
// Prometheus.
package serve
