// Package leader is the share-partition leader's side of the persister (docs/semantics.md §8,
// Kafka's KAFKA-17002): SharePartition acquires, acknowledges and releases records of one
// share-partition and persists its state through a sharestate.Store; Manager serves a broker's
// share-partitions, drops fenced ones and loads them again.
package leader
