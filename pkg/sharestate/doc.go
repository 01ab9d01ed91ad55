// Package sharestate keeps Kafka share-group state (KIP-932) in Kubernetes: it implements the
// share-state persister's five operations (Initialize, Read, Write, Delete, ReadSummary) against
// the status of SharePartitionState custom resources, with Kafka's semantics as written in the
// project's specification (share-state.md).
//
// The pure parts, which have no Kubernetes dependency, are the state batch model and its storage
// codec (batch.go, codec.go) and the batch combine rule (combine.go).
package sharestate
