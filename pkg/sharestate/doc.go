// Package sharestate keeps Kafka share-group state (KIP-932) in Kubernetes: it implements the
// share-state persister's five operations (Initialize, Read, Write, Delete, ReadSummary) against
// the status of SharePartitionState custom resources, with Kafka's semantics as written in the
// project's specification (share-state.md).
//
// The pure parts have no Kubernetes dependency: the state batch model and its storage codec
// (batch.go, codec.go), the batch combine rule (combine.go) and the sequential rules of each
// operation (rules.go). The Persister (persister.go, op_*.go) applies those rules to the object it
// read and writes the result conditionally on that object's resourceVersion (update.go); writes of one
// partition that meet are combined into one status update (slot.go).
//
// The share-partition leader's side (spec §8) is SharePartition (sharepartition*.go) and Manager
// (splmanager.go): they acquire and acknowledge records and persist them through a Store, either the
// Persister in process or the sidecar over Kafka's wire protocol (package kafkawire).
package sharestate

// What a persister needs of the Kubernetes API, in the namespace it serves; `make manifests` turns
// these markers into config/rbac/sidecar/role.yaml, the sidecar's role (bind it with a RoleBinding in
// each broker namespace).
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharegroups,verbs=get;list;create
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates,verbs=get;create;delete
// +kubebuilder:rbac:groups=sharestate.dev,resources=sharepartitionstates/status,verbs=get;update
