// Package controllers holds the operator's reconcilers: they fence stale share-partition leaders by
// raising the state epoch, adopt and aggregate a ShareGroup's partitions, and carry out offset resets.
package controllers

// The operator's permissions; `make manifests` turns these markers into config/rbac/role.yaml.
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharegroups;sharepartitionstates,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharegroups/status;sharepartitionstates/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharegroups/finalizers;sharepartitionstates/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
