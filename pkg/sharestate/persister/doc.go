// Package persister is the share-state persister backed by Kubernetes: it answers the five
// operations of package sharestate by applying that package's rules to the status of
// SharePartitionState objects (objects.go), and writes the result conditionally on the
// resourceVersion it read (update.go), so that every history is linearizable (docs/semantics.md
// §10). Writes of one partition that meet go into one status update (group commit, slot.go); a
// group's declared topics answer "is this partition known" (topology.go); retries, timeouts and the
// client-side split between writes and bulk operations are in retry.go and options.go.
package persister

// What a persister needs of the Kubernetes API, in the namespace it serves; `make manifests` turns
// these markers into config/rbac/sidecar/role.yaml, the sidecar's role (bind it with a RoleBinding in
// each broker namespace). Patch on sharepartitionstates resets the managedFields of the objects it
// creates or finds with them (managedfields.go), and sets the leader-pod label when the recorded
// leader moves to another pod (leader_label.go).
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharegroups,verbs=get;list;create
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates,verbs=get;create;delete;patch
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates/status,verbs=get;update
