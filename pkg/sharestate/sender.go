package sharestate

import "context"

// senderKey is the context key of the broker that sent a request.
type senderKey struct{}

// WithSender returns ctx naming brokerID (a Kafka node id) as the broker that sent the request ctx
// serves. A Kafka-protocol server sets it when the request says which broker sent it; a Store that
// records share-partition leaders records that broker rather than itself: in proxy mode a broker's
// persister sends its Reads and Writes to the share coordinator of each key, usually another
// broker's sidecar.
func WithSender(ctx context.Context, brokerID int32) context.Context {
	return context.WithValue(ctx, senderKey{}, brokerID)
}

// SenderFrom returns the broker WithSender named in ctx; false when none was named (the request came
// from a client that does not say which broker it is, or from a caller in the same process).
func SenderFrom(ctx context.Context) (int32, bool) {
	id, ok := ctx.Value(senderKey{}).(int32)
	return id, ok
}
