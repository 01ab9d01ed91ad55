package persister

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// topology answers semantics §6: is a topic partition known to its share group? A group's ShareGroup (found
// by group id, see findShareGroup) may declare its topics with their partition counts; where it
// declares none, or does not exist, every partition is known. Declarations are read at most once per TTL per group, so the steady-state
// write path does not read the ShareGroup.
type topology struct {
	client    client.Client
	namespace string
	ttl       time.Duration
	now       func() time.Time
	request   func(context.Context, string, func(context.Context) error) error // one API request, with retries

	mu     sync.Mutex
	groups map[string]groupTopology
}

// maxCachedGroups bounds the topology cache; past it the cache starts afresh.
const maxCachedGroups = 10000

type groupTopology struct {
	fetched  time.Time
	declared map[sharestate.TopicID]int32 // nil: nothing declared, every partition is known
}

func newTopology(c client.Client, namespace string, ttl time.Duration, now func() time.Time,
	request func(context.Context, string, func(context.Context) error) error) *topology {
	return &topology{client: c, namespace: namespace, ttl: ttl, now: now, request: request, groups: map[string]groupTopology{}}
}

// known reports whether the partition is known. An error means the ShareGroup could not be read
// (and nothing was cached for the group yet).
func (t *topology) known(ctx context.Context, group string, topic sharestate.TopicID, partition int32) (bool, error) {
	g, err := t.get(ctx, group)
	if err != nil {
		return false, err
	}
	if g.declared == nil {
		return true, nil
	}
	count, ok := g.declared[topic]
	return ok && partition < count, nil
}

func (t *topology) get(ctx context.Context, group string) (groupTopology, error) {
	t.mu.Lock()
	g, ok := t.groups[group]
	t.mu.Unlock()
	if ok && t.now().Sub(g.fetched) < t.ttl {
		return g, nil
	}
	fresh, err := t.fetch(ctx, group)
	if err != nil {
		if ok {
			return g, nil // a stale declaration beats failing the operation
		}
		return groupTopology{}, err
	}
	t.mu.Lock()
	if len(t.groups) >= maxCachedGroups {
		t.groups = map[string]groupTopology{}
	}
	t.groups[group] = fresh
	t.mu.Unlock()
	return fresh, nil
}

func (t *topology) fetch(ctx context.Context, group string) (groupTopology, error) {
	sg, err := findShareGroup(ctx, t.client, t.namespace, group, t.request)
	if err != nil {
		return groupTopology{}, err
	}
	g := groupTopology{fetched: t.now()}
	if sg == nil || len(sg.Spec.Topics) == 0 {
		return g, nil
	}
	g.declared = make(map[sharestate.TopicID]int32, len(sg.Spec.Topics))
	for _, topic := range sg.Spec.Topics {
		id, err := sharestate.ParseTopicID(string(topic.TopicID))
		if err != nil {
			continue // the schema refuses such ids; one that got in declares nothing
		}
		g.declared[id] = topic.Partitions
	}
	return g, nil
}

// forget drops a group's cached declaration, so the next lookup reads it again.
func (t *topology) forget(group string) {
	t.mu.Lock()
	delete(t.groups, group)
	t.mu.Unlock()
}
