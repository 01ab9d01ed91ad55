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

	fetchTimeout time.Duration // bounds a fetch shared by several lookups, none of whose contexts it follows

	mu       sync.Mutex
	groups   map[string]groupTopology
	fetching map[string]*groupFetch // the fetch in flight, by group
}

// groupFetch is one read of a group's ShareGroup, shared by every lookup that finds the group's
// declaration missing or expired while it runs. Without it, a broker writing many partitions of one
// group at once read the ShareGroup once per write in flight each time the TTL ran out: in the scale
// bench's closed loop (64 writes in flight, a group's 50 partitions written in a row) that was 0.4–0.6
// GETs a write (run 46), where the open loop, one write at a time, made one per group.
type groupFetch struct {
	done   chan struct{} // closed once result and err are set
	result groupTopology
	err    error
	joined int // lookups that joined the fetch after it started, under topology.mu (tests wait on it)
}

// maxCachedGroups bounds the topology cache; past it the cache starts afresh.
const maxCachedGroups = 10000

type groupTopology struct {
	fetched  time.Time
	declared map[sharestate.TopicID]int32 // nil: nothing declared, every partition is known
}

func newTopology(c client.Client, namespace string, ttl, fetchTimeout time.Duration, now func() time.Time,
	request func(context.Context, string, func(context.Context) error) error) *topology {
	return &topology{client: c, namespace: namespace, ttl: ttl, fetchTimeout: fetchTimeout, now: now, request: request,
		groups: map[string]groupTopology{}, fetching: map[string]*groupFetch{}}
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
	fresh, err := t.sharedFetch(ctx, group)
	if err != nil {
		if ok {
			return g, nil // a stale declaration beats failing the operation
		}
		return groupTopology{}, err
	}
	return fresh, nil
}

// sharedFetch reads the group's declaration, joining the fetch in flight for the group if there is
// one. The fetch runs on a goroutine of its own, bounded by fetchTimeout and by none of its callers'
// contexts: a caller that gives up does not fail the others. Its result is cached unless the group
// was forgotten while it ran (the ShareGroup it read may predate one just created).
func (t *topology) sharedFetch(ctx context.Context, group string) (groupTopology, error) {
	t.mu.Lock()
	f, joined := t.fetching[group]
	if joined {
		f.joined++
	} else {
		f = &groupFetch{done: make(chan struct{})}
		t.fetching[group] = f
		go t.runFetch(context.WithoutCancel(ctx), group, f)
	}
	t.mu.Unlock()
	select {
	case <-f.done:
		return f.result, f.err
	case <-ctx.Done():
		return groupTopology{}, ctx.Err()
	}
}

func (t *topology) runFetch(ctx context.Context, group string, f *groupFetch) {
	ctx, cancel := context.WithTimeout(ctx, t.fetchTimeout)
	defer cancel()
	f.result, f.err = t.fetch(ctx, group)
	t.mu.Lock()
	if t.fetching[group] == f {
		delete(t.fetching, group)
		if f.err == nil {
			if len(t.groups) >= maxCachedGroups {
				t.groups = map[string]groupTopology{}
			}
			t.groups[group] = f.result
		}
	}
	t.mu.Unlock()
	close(f.done)
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

// forget drops a group's cached declaration, so the next lookup reads it again; a fetch in flight
// for the group still answers the lookups that joined it, but is neither cached nor joined again.
func (t *topology) forget(group string) {
	t.mu.Lock()
	delete(t.groups, group)
	delete(t.fetching, group)
	t.mu.Unlock()
}
