package persister

import (
	"context"
	"sync"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// This file decides whom a Read or Write records as the partition's leader: the broker that sent it.
// In direct mode that is the broker of this persister's pod. In proxy mode a stock broker's persister
// sends each key's Reads and Writes to the key's share coordinator (docs/kafka-integration.md §2), so
// the request usually reaches another broker's sidecar, and the kafkawire server names the sender in
// the request's context (sharestate.SenderFrom). Recording this persister's own broker instead would
// have the operator fence healthy leaders when a coordinator's pod goes, and never fence a leader
// that really died.

// BrokerResolver finds the pod of a broker other than the persister's own.
type BrokerResolver interface {
	// ResolveBroker returns the identity (broker id, pod name and UID) of the pod that serves
	// brokerID, or an error when there is no such pod, or no single one. staleUID, when not empty, is
	// a pod UID the caller found out of date (the partition's fenced leader): an answer that names it
	// must come from a fresh look-up, not from a cache.
	ResolveBroker(ctx context.Context, brokerID int32, staleUID string) (Identity, error)
}

// callerFunc returns the identity to record as leader for one request, and a failure to answer
// with when it cannot be told; it is computed once per request, when a partition first needs it.
type callerFunc func() (Identity, sharestate.Outcome)

// callerOf returns the request's callerFunc.
func (p *Persister) callerOf(ctx context.Context) callerFunc {
	return sync.OnceValues(func() (Identity, sharestate.Outcome) { return p.caller(ctx, "") })
}

// caller returns the identity of the broker that sent the request: the broker ctx names, when it is
// not this persister's own, resolved to its pod; otherwise this persister's Identity. A sender whose
// pod cannot be found is answered COORDINATOR_NOT_AVAILABLE, which Kafka's persister retries: a
// wrong or empty leader recorded would mislead the operator's fencing.
func (p *Persister) caller(ctx context.Context, staleUID string) (Identity, sharestate.Outcome) {
	sender, ok := sharestate.SenderFrom(ctx)
	if !ok || sender == p.opts.Identity.BrokerID {
		return p.opts.Identity, sharestate.Outcome{}
	}
	if p.opts.Senders == nil {
		return Identity{}, sharestate.Fail(sharestate.ErrCoordinatorNotAvailable,
			"broker %d sent the request, and this persister has no way to find another broker's pod", sender)
	}
	id, err := p.opts.Senders.ResolveBroker(ctx, sender, staleUID)
	if err != nil {
		p.log.Info("Could not find the pod of the broker that sent a request", "brokerId", sender, "error", err.Error())
		return Identity{}, sharestate.Fail(sharestate.ErrCoordinatorNotAvailable, "the pod of broker %d, which sent the request, is not known: %v", sender, err)
	}
	return id, sharestate.Outcome{}
}

// refreshed returns the sender's identity looked up afresh, when the one a partition was refused
// for (its pod UID is the partition's fenced leader) may have come from a cache that outlived the
// pod, and the fresh look-up names another pod; false when there is nothing new to try. A broker
// whose pod was replaced would otherwise be taken for the pod it replaced, and refused, until the
// cache expired.
func (p *Persister) refreshed(ctx context.Context, id Identity) (Identity, bool) {
	if id == p.opts.Identity {
		return id, false
	}
	fresh, o := p.caller(ctx, id.PodUID)
	if !o.OK() || fresh == id {
		return id, false
	}
	return fresh, true
}
