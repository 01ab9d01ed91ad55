package metricsauth

import (
	"sync"
	"time"
)

// maxVerdicts bounds each verdict cache. Every scraper's token and user takes one entry; a caller
// sending a new random token with each request would otherwise grow the cache without bound.
const maxVerdicts = 1024

// verdicts keeps the API server's answers for a while, each until its own expiry: an allowed verdict
// longer than a refusal. Review errors are never kept.
type verdicts[V any] struct {
	mu      sync.Mutex
	entries map[string]verdict[V]
	now     func() time.Time
}

type verdict[V any] struct {
	value   V
	expires time.Time
}

func newVerdicts[V any](now func() time.Time) *verdicts[V] {
	return &verdicts[V]{entries: map[string]verdict[V]{}, now: now}
}

// get returns the verdict kept for key, if it has not expired.
func (c *verdicts[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// put keeps value for key for ttl. When the cache is full it first drops the expired verdicts, then,
// if none had expired, an arbitrary one: the cost of a dropped verdict is one more review.
func (c *verdicts[V]) put(key string, value V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= maxVerdicts {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < maxVerdicts {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[key] = verdict[V]{value: value, expires: now.Add(ttl)}
}
