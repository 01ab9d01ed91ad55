// Package metricsauth guards a metrics endpoint the way Kubernetes components guard theirs: the API
// server reviews each scrape's bearer token (a TokenReview) and decides whether the user it names may
// get the path scraped (a SubjectAccessReview). The operator and the sidecar serve their metrics
// through it, on controller-runtime's metrics server.
//
// It is built on client-go alone. Kubernetes' own delegated authentication and authorization
// (k8s.io/apiserver) would do the same two reviews, but bring the API server's authorizer stack with
// them (CEL, OpenTelemetry, gRPC): a fifth of each binary, and memory at start-up, for two requests
// and a cache.
package metricsauth
