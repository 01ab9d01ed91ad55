package sidecar

// What the sidecar needs beyond the persister's rules (pkg/sharestate/persister/doc.go): its metrics
// endpoint has the API server review each scrape's token and access, as the operator's does. These two rules are
// cluster-scoped, which a RoleBinding cannot grant: the chart grants them to the brokers' service
// account with a ClusterRoleBinding, and only while the sidecar serves its metrics securely.
// `make manifests` turns them into config/rbac/sidecar/role.yaml with the persister's.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// In proxy mode the sidecar reads the upstream's metadata (internal/sidecar/upstream_metadata.go): it
// lists the namespace's SharePartitionStates to delete those of deleted topics (the persister's rules
// grant the delete), and records a Warning event on its own pod when its broker is advertised around
// the proxy (the events library creates an event, then patches it as a series).
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates,verbs=list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
