// Package leader is the share-partition leader's side of the persister (docs/semantics.md §8,
// Kafka's KAFKA-17002): SharePartition acquires, acknowledges and releases records of one
// share-partition and persists its state through a sharestate.Store; Manager serves a broker's
// share-partitions, drops fenced ones and loads them again.
//
// It is for a share-partition leader written in Go: a broker, a proxy that keeps share state itself,
// or a simulator of consumers. It needs only a sharestate.Store, which can be the persister (on
// Kubernetes), kafkawire.Client (the sidecar, over Kafka's protocol) or one of the caller's own
// (ExampleManager builds one in memory from the model's rules). The operator and the sidecar do not
// use it: a Kafka broker is its own share-partition leader. This project's tests use it to drive the
// persister and the sidecar as Kafka's would (make run's stand-in brokers, the e2e tests).
package leader
