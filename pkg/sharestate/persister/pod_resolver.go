package persister

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// What the sidecar needs of pods in its namespace: PodResolver lists them by label, and the sidecar
// labels its own pod with its broker id (merge patch). `make manifests` adds these rules to
// config/rbac/sidecar/role.yaml. get and watch are not used today; they let a later version watch
// the pods instead of listing them, without a change of the role that every installation binds.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;patch

// DefaultResolveTTL is how long PodResolver trusts a broker's pod found by a List: a few seconds, so
// that a broker whose pod was replaced is soon found as its new pod, without a List per request.
const DefaultResolveTTL = 5 * time.Second

// minRefresh bounds how often a pod UID a caller found stale sends PodResolver back to the API
// server: a fenced pod that keeps sending is answered from the last List meanwhile.
const minRefresh = time.Second

// PodResolver is a BrokerResolver over the Kubernetes API: it finds a broker's pod in its namespace
// by the label sharestatev1.LabelBrokerID, which each broker's sidecar sets on its own pod. It
// remembers each broker's pod for a TTL, and lists the pods again on a miss, when the TTL is past, or
// when the caller names the remembered pod's UID as stale. It is safe for concurrent use.
type PodResolver struct {
	client    client.Reader
	namespace string
	ttl       time.Duration
	now       func() time.Time

	mu    sync.Mutex
	cache map[int32]resolvedPod
	// listing admits one List at a time: a burst of requests from a broker not yet known costs one.
	listing chan struct{}
}

type resolvedPod struct {
	id Identity
	at time.Time
}

// NewPodResolver returns a PodResolver reading pods through c (which, as the persister's clients,
// should read from the API server, not from a cache) in namespace; ttl 0 is DefaultResolveTTL.
func NewPodResolver(c client.Reader, namespace string, ttl time.Duration) *PodResolver {
	if ttl <= 0 {
		ttl = DefaultResolveTTL
	}
	return &PodResolver{client: c, namespace: namespace, ttl: ttl, now: time.Now,
		cache: map[int32]resolvedPod{}, listing: make(chan struct{}, 1)}
}

var _ BrokerResolver = (*PodResolver)(nil)

// ResolveBroker returns the identity of the pod labelled with brokerID (BrokerResolver).
func (r *PodResolver) ResolveBroker(ctx context.Context, brokerID int32, staleUID string) (Identity, error) {
	if id, ok := r.cached(brokerID, staleUID); ok {
		return id, nil
	}
	select {
	case r.listing <- struct{}{}:
		defer func() { <-r.listing }()
	case <-ctx.Done():
		return Identity{}, fmt.Errorf("waiting to list the pods of broker %d: %w", brokerID, ctx.Err())
	}
	// Another caller may have listed while this one waited.
	if id, ok := r.cached(brokerID, staleUID); ok {
		return id, nil
	}
	id, err := r.list(ctx, brokerID)
	if err != nil {
		return Identity{}, err
	}
	r.mu.Lock()
	r.cache[brokerID] = resolvedPod{id: id, at: r.now()}
	r.mu.Unlock()
	return id, nil
}

// cached returns the remembered pod of brokerID while it is within its TTL, unless it is the pod the
// caller found stale and was not listed just now.
func (r *PodResolver) cached(brokerID int32, staleUID string) (Identity, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.cache[brokerID]
	if !ok {
		return Identity{}, false
	}
	age := r.now().Sub(e.at)
	switch {
	case age >= r.ttl:
		delete(r.cache, brokerID)
		return Identity{}, false
	case staleUID != "" && e.id.PodUID == staleUID && age >= minRefresh:
		return Identity{}, false
	}
	return e.id, true
}

// errNoPod: no pod says it serves the broker (its sidecar has not labelled it yet, or it is gone).
var errNoPod = errors.New("no pod is labelled with that broker id")

// list finds the pod labelled with brokerID: the one that is live (not terminating, not finished),
// or, when none is, the newest of the others, as its own sidecar would record itself in direct mode
// (the operator then fences it). Two live pods claiming one broker id is an error: which one the
// broker runs in cannot be told.
func (r *PodResolver) list(ctx context.Context, brokerID int32) (Identity, error) {
	var pods corev1.PodList
	label := client.MatchingLabels{sharestatev1.LabelBrokerID: strconv.FormatInt(int64(brokerID), 10)}
	if err := r.client.List(ctx, &pods, client.InNamespace(r.namespace), label); err != nil {
		return Identity{}, fmt.Errorf("listing the pods of broker %d: %w", brokerID, err)
	}
	var live, other []*corev1.Pod
	for i := range pods.Items {
		pod := &pods.Items[i]
		if podLive(pod) {
			live = append(live, pod)
		} else {
			other = append(other, pod)
		}
	}
	switch {
	case len(live) > 1:
		return Identity{}, fmt.Errorf("pods %s and %s both say they serve broker %d", live[0].Name, live[1].Name, brokerID)
	case len(live) == 1:
		return identityOf(brokerID, live[0]), nil
	case len(other) > 0:
		return identityOf(brokerID, newest(other)), nil
	}
	return Identity{}, fmt.Errorf("broker %d in namespace %s: %w", brokerID, r.namespace, errNoPod)
}

// podLive: neither terminating nor finished.
func podLive(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase != corev1.PodFailed && pod.Status.Phase != corev1.PodSucceeded
}

func newest(pods []*corev1.Pod) *corev1.Pod {
	n := pods[0]
	for _, pod := range pods[1:] {
		if n.CreationTimestamp.Before(&pod.CreationTimestamp) {
			n = pod
		}
	}
	return n
}

func identityOf(brokerID int32, pod *corev1.Pod) Identity {
	return Identity{BrokerID: brokerID, PodName: pod.Name, PodUID: string(pod.UID)}
}
