// Package kafkawire is the share-state persister's five operations on Kafka's wire protocol (API
// keys 83–87, semantics §2): the codec and a client. One table describes the five operations
// (ops.go: API key, kmsg types, the conversions both ways, the Store method); headers (header.go)
// and frames (frame.go) are written once; apis.go holds the versions spoken. Client is a
// sharestate.Store that reaches a share-state server over TCP; a franz-go user can instead send
// the requests the *RequestToKmsg functions build on a kgo client of its own.
//
// The server and the proxy that answer these requests are package serve, below this one: a user of
// the codec or the client links neither. This package imports the model, franz-go's kmsg and the
// standard library only, and nothing here writes a message field by hand.
package kafkawire
