// Package sharestate is the model of Kafka share-group state (KIP-932) that the rest of this
// module builds on: the types and error codes of the share-state persister's five operations
// (Initialize, Read, Write, Delete, ReadSummary), state batches and their storage codec (batch.go,
// codec.go), the batch combine rule (combine.go), the sequential rules of each operation (rules.go),
// as docs/semantics.md states them, and the Store interface their callers use (store.go).
//
// It imports nothing of Kubernetes. The stores are built on it: package persister keeps the state
// in SharePartitionState custom resources, package kafkawire speaks the five operations over Kafka's
// wire protocol, both ways, and package leader is the share-partition leader that calls a Store.
package sharestate
