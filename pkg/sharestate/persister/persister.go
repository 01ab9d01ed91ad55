package persister

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/internal/fanout"
)

// Persister implements the share-state persister's five operations (semantics §2) against
// SharePartitionState objects. It is safe for concurrent use; several persisters (one per broker pod)
// may serve the same partitions: every status write is conditional on the resourceVersion it was
// computed from. Every operation answers per partition, in the request's order: one partition's error
// never fails the others.
type Persister struct {
	opts     Options
	slots    *slotTable
	topology *topology
	obs      Observer
	// patchForbidden is set once the API server refused a patch of a SharePartitionState (a sidecar
	// role from before the persister needed it): the persister then stops resetting managedFields
	// (managedfields.go) and setting leader-pod labels (leader_label.go).
	patchForbidden atomic.Bool
	log            logr.Logger
}

// New returns a Persister; it fails only for options it cannot work with.
func New(opts Options) (*Persister, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	p := &Persister{
		opts:  opts,
		slots: newSlotTable(opts.MaxCachedPartitions, opts.MaxCacheBytes),
		obs:   opts.Observer,
		log:   opts.Logger,
	}
	p.topology = newTopology(opts.Client, opts.Namespace, opts.TopologyTTL, opts.OperationTimeout, opts.Now, p.withRetry)
	return p, nil
}

// Initialize creates or resets the state of each partition (semantics §5): a fresh state at a higher state
// epoch, nothing at an equal one. It creates the SharePartitionState, and the group's ShareGroup if
// there is none, which then owns it.
func (p *Persister) Initialize(ctx context.Context, req sharestate.InitializeRequest) sharestate.InitializeResponse {
	ctx, cancel := p.operationContext(ctx)
	defer cancel()
	return fanout.Partitions(ctx, req, func(ctx context.Context, topic sharestate.TopicID, in sharestate.InitializePartition) (r sharestate.PartitionResult) {
		defer p.recoverPartition("initialize", in.Partition, func(pr sharestate.PartitionResult) { r = pr })
		return p.counted("initialize", in.Partition, p.initialize(ctx, req.GroupID, topic, in))
	})
}

// Read returns each partition's state (semantics §5), first storing a higher leader epoch, which fences
// older leaders, and recording the broker that sent the Read as the leader: the one ctx names
// (sharestate.WithSender), or else this persister's.
func (p *Persister) Read(ctx context.Context, req sharestate.ReadRequest) sharestate.ReadResponse {
	ctx, cancel := p.operationContext(ctx)
	defer cancel()
	caller := p.callerOf(ctx)
	return fanout.Partitions(ctx, req, func(ctx context.Context, topic sharestate.TopicID, in sharestate.ReadPartition) (r sharestate.ReadResult) {
		defer p.recoverPartition("read", in.Partition, func(pr sharestate.PartitionResult) { r = sharestate.ReadResult{PartitionResult: pr, StartOffset: -1} })
		res := p.read(ctx, caller, req.GroupID, topic, in)
		res.PartitionResult = p.counted("read", in.Partition, sharestate.Outcome{Code: res.ErrorCode, Message: res.ErrorMessage})
		return res
	})
}

// Write combines each partition's new state batches into its stored state (semantics §5, §7), and
// records the broker that sent it as the leader, as Read does. Writes of one partition that arrive
// while an update of it is in flight go together into the next update.
func (p *Persister) Write(ctx context.Context, req sharestate.WriteRequest) sharestate.WriteResponse {
	ctx, cancel := p.operationContext(ctx)
	defer cancel()
	caller := p.callerOf(ctx)
	return fanout.Partitions(ctx, req, func(ctx context.Context, topic sharestate.TopicID, in sharestate.WritePartition) (r sharestate.PartitionResult) {
		defer p.recoverPartition("write", in.Partition, func(pr sharestate.PartitionResult) { r = pr })
		start := time.Now()
		o := p.write(ctx, caller, req.GroupID, topic, in)
		p.obs.WriteAnswered(time.Since(start))
		return p.counted("write", in.Partition, o)
	})
}

// Delete removes each partition's state; deleting what does not exist succeeds.
func (p *Persister) Delete(ctx context.Context, req sharestate.DeleteRequest) sharestate.DeleteResponse {
	ctx, cancel := p.operationContext(ctx)
	defer cancel()
	return fanout.Partitions(ctx, req, func(ctx context.Context, topic sharestate.TopicID, in sharestate.DeletePartition) (r sharestate.PartitionResult) {
		defer p.recoverPartition("delete", in.Partition, func(pr sharestate.PartitionResult) { r = pr })
		return p.counted("delete", in.Partition, p.delete(ctx, req.GroupID, topic, in))
	})
}

// ReadSummary returns each partition's epochs, start offset and delivery-complete count; a partition
// with no state is not an error (semantics §5). It never writes.
func (p *Persister) ReadSummary(ctx context.Context, req sharestate.ReadSummaryRequest) sharestate.ReadSummaryResponse {
	ctx, cancel := p.operationContext(ctx)
	defer cancel()
	return fanout.Partitions(ctx, req, func(ctx context.Context, topic sharestate.TopicID, in sharestate.ReadSummaryPartition) (r sharestate.ReadSummaryResult) {
		defer p.recoverPartition("read_summary", in.Partition, func(pr sharestate.PartitionResult) {
			r = sharestate.ReadSummaryResult{PartitionResult: pr, StartOffset: -1, DeliveryCompleteCount: -1}
		})
		res := p.readSummary(ctx, req.GroupID, topic, in)
		res.PartitionResult = p.counted("read_summary", in.Partition, sharestate.Outcome{Code: res.ErrorCode, Message: res.ErrorMessage})
		return res
	})
}

// recoverPartition, deferred by a partition's operation, turns a panic (a bug, never an input the
// checks let through) into that partition's UNKNOWN_SERVER_ERROR, given to answer, with the stack in
// the log: the other partitions, the other requests and the process go on.
func (p *Persister) recoverPartition(op string, partition int32, answer func(sharestate.PartitionResult)) {
	v := recover()
	if v == nil {
		return
	}
	p.log.Error(fmt.Errorf("panic: %v", v), "A partition's operation panicked", "operation", op, "partition", partition, "stack", string(debug.Stack()))
	answer(p.counted(op, partition, sharestate.Fail(sharestate.ErrUnknownServerError, "the persister failed on partition %d: %v", partition, v)))
}

// counted counts the outcome and makes it a partition's result.
func (p *Persister) counted(op string, partition int32, o sharestate.Outcome) sharestate.PartitionResult {
	p.obs.Operation(op, o.Code)
	return sharestate.PartitionResult{Partition: partition, ErrorCode: o.Code, ErrorMessage: o.Message}
}

// operationContext bounds a request, retries included, by OperationTimeout. The whole request shares
// the one deadline: every partition is answered within it, however many partitions wait for their
// turn or queue behind another update of theirs.
func (p *Persister) operationContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.opts.OperationTimeout)
}

func (p *Persister) now() metav1.Time { return metav1.NewTime(p.opts.Now()) }

// outcomeOf maps how an update loop ended to a partition's answer, when the computed answer cannot
// stand: the API server could not be reached (retriable) or something is wrong with the object.
func (p *Persister) outcomeOf(key partitionKey, result updateResult, err error) sharestate.Outcome {
	switch result {
	case updateUnknown, updateUnavailable:
		return unavailable(err)
	default:
		p.log.Error(err, "Share-partition state could not be used", "group", key.group, "topicId", key.topic.String(), "partition", key.partition)
		return sharestate.Fail(sharestate.ErrUnknownServerError, "%v", err)
	}
}

// loopEnded reports whether an update loop's computed answers stand.
func loopEnded(result updateResult) bool {
	return result == updateWritten || result == updateNoWrite
}
