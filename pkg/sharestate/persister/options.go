package persister

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// Identity is a broker and its pod. A persister's own is recorded as a share-partition's leader on
// every Read and Write that no other broker sent, so the operator can fence the partition when that
// pod is gone.
type Identity struct {
	BrokerID int32
	PodName  string
	PodUID   string
}

// Options configure a Persister. Client and Namespace are required; the rest have defaults.
type Options struct {
	// Client talks to the API server. It must read from the API server itself (client.New), not
	// from a cache: fencing decisions are never taken from a stale cache.
	Client client.Client
	// BulkClient, when set, serves Read, Initialize, Delete and ReadSummary, and Client serves Write
	// (and the group lookups writes need). Give it a client-side rate limiter of its own: a broker's
	// Read of thousands of partitions after a failover then never queues the Writes of the partitions
	// it already leads behind it. Like Client, it must not read from a cache. Default: Client.
	BulkClient client.Client
	// Namespace holds the ShareGroups and SharePartitionStates.
	Namespace string
	// Identity is recorded as the leader of the partitions this persister reads and writes, unless the
	// request's context names another broker as its sender (sharestate.WithSender).
	Identity Identity
	// Senders finds the pod of a broker, other than Identity's, that sent a Read or Write (the
	// kafkawire server names it from the request's client id; PodResolver finds it by the pod label
	// the sidecars set). Nil: such a request is answered COORDINATOR_NOT_AVAILABLE, since the leader
	// to record cannot be told.
	Senders BrokerResolver

	// Limits bound a write's batches and a state's batches (default DefaultLimits).
	Limits sharestate.Limits
	// MaxWritesPerUpdate bounds how many queued writes of one partition one status update carries
	// (default 256).
	MaxWritesPerUpdate int
	// MaxPendingWrites bounds the writes queued for one partition; a write beyond it is answered
	// COORDINATOR_LOAD_IN_PROGRESS at once (default 4096).
	MaxPendingWrites int
	// MaxCachedPartitions bounds the partitions whose last object is kept to skip a GET before a write
	// (default 10000); idle ones are evicted beyond it.
	MaxCachedPartitions int
	// MaxCacheBytes bounds the memory the cached objects take, as estimated from their stored batches
	// (default DefaultMaxCacheBytes); beyond it idle partitions' objects are dropped, and their next
	// write reads the object first.
	MaxCacheBytes int64
	// RequestTimeout bounds one API request (default 10s).
	RequestTimeout time.Duration
	// OperationTimeout bounds one request: every partition of it is answered within it, retries and
	// time queued behind another update included; one that is not done by then is answered
	// COORDINATOR_NOT_AVAILABLE (default 15s).
	OperationTimeout time.Duration
	// TopologyTTL is how long a ShareGroup's declared topics are trusted before they are read again
	// (default 10s).
	TopologyTTL time.Duration
	// Now returns the current time (default time.Now); tests set it.
	Now func() time.Time
	// Observer is told what the persister does (default: nothing is); the binaries pass one that
	// keeps their Prometheus metrics.
	Observer Observer
	// Logger receives what the persister swallows: corrupt stored state, refused updates (default:
	// discard).
	Logger logr.Logger
}

func (o *Options) setDefaults() error {
	if o.Client == nil {
		return errors.New("sharestate: Options.Client is required")
	}
	if o.Namespace == "" {
		return errors.New("sharestate: Options.Namespace is required")
	}
	if o.Identity.BrokerID < 0 {
		return fmt.Errorf("sharestate: broker id %d is negative", o.Identity.BrokerID)
	}
	if o.BulkClient == nil {
		o.BulkClient = o.Client
	}
	if o.Limits == (sharestate.Limits{}) {
		o.Limits = sharestate.DefaultLimits
	}
	setDefault(&o.MaxWritesPerUpdate, 256)
	setDefault(&o.MaxPendingWrites, 4096)
	setDefault(&o.MaxCachedPartitions, 10000)
	setDefault(&o.MaxCacheBytes, DefaultMaxCacheBytes)
	setDefault(&o.RequestTimeout, 10*time.Second)
	setDefault(&o.OperationTimeout, 15*time.Second)
	setDefault(&o.TopologyTTL, 10*time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	return nil
}

// DefaultMaxCacheBytes is the default bound of the persister's cache: 128 MiB. The chart limits the
// sidecar to 512 MiB; the Go runtime may let the heap grow to twice what is live before it collects,
// which leaves room for the requests in flight and the process itself.
const DefaultMaxCacheBytes int64 = 128 << 20

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
