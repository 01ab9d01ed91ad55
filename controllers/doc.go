// Package controllers holds the operator's reconcilers: they fence stale share-partition leaders by
// raising the state epoch, adopt and aggregate a ShareGroup's partitions, and carry out offset resets.
package controllers

// Permissions beyond the reconcilers' own (which sit beside each Reconcile). `make manifests` turns
// these markers into config/rbac/role.yaml.
//
// Leader election, and its LeaderElection event, which controller-runtime records through the core/v1
// events API (v0.25.2: pkg/leaderelection/leader_election.go passes GetEventRecorderFor's recorder,
// whose sink in pkg/internal/recorder is corev1client.EventSinkImpl), not events.k8s.io:
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// The metrics endpoint's authentication and authorization:
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
