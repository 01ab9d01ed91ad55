// Package metricsauth guards a metrics endpoint the way Kubernetes components guard theirs: the API
// server reviews each scrape's bearer token (a TokenReview) and decides whether the user it names may
// get the path scraped (a SubjectAccessReview). The operator and the sidecar serve their metrics
// through it, on controller-runtime's metrics server.
package metricsauth
