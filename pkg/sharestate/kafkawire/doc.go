// Package kafkawire carries the share-state persister's five operations over Kafka's wire protocol
// (API keys 83–87, semantics §2): the conversions between franz-go's kmsg messages and the sharestate
// types, which the sidecar's server and this package's client share, the framing both sides read,
// the table of API versions they speak, and Client, a sharestate.Store that reaches a sidecar over
// TCP.
//
// The encodings themselves are kmsg's; nothing here writes a message field by hand.
package kafkawire
