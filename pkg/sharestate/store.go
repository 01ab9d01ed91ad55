package sharestate

import "context"

// Store is the share-state persister as its callers see it: the five operations, answered per
// partition, one partition's error never failing the others. persister.Persister implements it
// against the Kubernetes API; kafkawire.Client over TCP. The share-partition leader works against
// either.
type Store interface {
	Initialize(ctx context.Context, req InitializeRequest) InitializeResponse
	Read(ctx context.Context, req ReadRequest) ReadResponse
	Write(ctx context.Context, req WriteRequest) WriteResponse
	Delete(ctx context.Context, req DeleteRequest) DeleteResponse
	ReadSummary(ctx context.Context, req ReadSummaryRequest) ReadSummaryResponse
}
