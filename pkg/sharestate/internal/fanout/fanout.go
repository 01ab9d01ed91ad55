// Package fanout works on the partitions of a share-state request in parallel, keeping the request's
// order: the persister and the share-partition leader both serve requests of many partitions. It is
// internal to pkg/sharestate, the only place its users are.
package fanout

import (
	"context"
	"sync"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// Limit bounds the partitions worked on at once.
const Limit = 64

// Partitions answers every partition of req with fn, at most Limit at once, and returns the answers
// in the request's order. A request of one partition is answered on the caller's goroutine.
func Partitions[P, R any](ctx context.Context, req sharestate.Request[P], fn func(context.Context, sharestate.TopicID, P) R) sharestate.Response[R] {
	resp := sharestate.Response[R]{Topics: make([]sharestate.TopicData[R], len(req.Topics))}
	if len(req.Topics) == 1 && len(req.Topics[0].Partitions) == 1 { // the common case: no goroutine
		t := req.Topics[0]
		resp.Topics[0] = sharestate.TopicData[R]{TopicID: t.TopicID, Partitions: []R{fn(ctx, t.TopicID, t.Partitions[0])}}
		return resp
	}
	var each []func()
	for ti, t := range req.Topics {
		results := make([]R, len(t.Partitions))
		resp.Topics[ti] = sharestate.TopicData[R]{TopicID: t.TopicID, Partitions: results}
		for pi, in := range t.Partitions {
			each = append(each, func() { results[pi] = fn(ctx, t.TopicID, in) })
		}
	}
	Run(each)
	return resp
}

// Each calls fn on every item, at most Limit at once, and returns when all calls have.
func Each[T any](items []T, fn func(T)) {
	each := make([]func(), len(items))
	for i, item := range items {
		each[i] = func() { fn(item) }
	}
	Run(each)
}

// Run calls every function, at most Limit at once, and returns when all have.
func Run(fns []func()) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, Limit)
	for _, fn := range fns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			fn()
		})
	}
	wg.Wait()
}
