package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The last step of a scale size: the victim broker's pod deleted under the load, the operator's fences
// of the partitions it led timed, and the raw status updates that raise the same epochs again as the
// baseline ("The fence" in docs/performance.md).

// fenceUnderLoad runs the open loop at rate, deletes the victim broker's pod and times until the
// operator has fenced every partition it led; then, the operator stopped (as the fence bench's
// baseline runs without it), times raw status updates of the same partitions, the load still running.
func (s *scaleRun) fenceUnderLoad(ctx context.Context, rate float64) (fence, raw time.Duration, err error) {
	loop := startOpenLoop(ctx, rate, s.write)
	defer loop.stopAndWait()
	if !sleepUntil(ctx, time.Now().Add(s.cfg.Warmup)) {
		return 0, 0, ctx.Err()
	}
	ns, victims := s.cluster.namespaces[0], s.cluster.victimNames()
	profiled := s.profileWindow(ctx, fmt.Sprintf("scale-%d-fence", s.n))
	before := s.operatorRequests(ctx)
	fencing := s.startPhase(ctx)
	if fence, err = s.fenceVictims(ctx, ns, victims); err != nil {
		return 0, 0, err
	}
	fenced := fencing.end(ctx, "the fence", loop)
	s.logFenceRequests(before, s.operatorRequests(ctx), len(victims))
	if err := <-profiled; err != nil {
		fmt.Fprintf(s.log, "bench: scale-%d: profiling the operator and kube-apiserver: %v\n", s.n, err)
	}
	s.operator.stop()
	updating := s.startPhase(ctx)
	if raw, err = s.rawUpdates(ctx, ns, victims); err != nil {
		return 0, 0, err
	}
	updated := updating.end(ctx, "the raw updates", loop)
	loop.stopAndWait()
	fmt.Fprintf(s.log, "bench: scale-%d: kube-apiserver's own time for the partitions' status requests (apiserver_request_duration_seconds): during the fence %s; during the raw updates %s\n",
		s.n, fenced.serverTimes, updated.serverTimes)
	// Both are bound by what the load leaves of the API server: say what the load had of it in each.
	during := func(end, took time.Duration) string {
		w := loop.window(end-took, end)
		return fmt.Sprintf("%.1f of %.1f writes/s, p50 %.0f ms, p99 %.0f ms", w.achievedPerSecond, w.offeredPerSecond,
			millis(percentile(w.latencies, 0.5)), millis(percentile(w.latencies, 0.99)))
	}
	fmt.Fprintf(s.log, "bench: scale-%d: the load during the fence: %s; during the raw updates: %s\n",
		s.n, during(fenced.loopEnd, fence), during(updated.loopEnd, raw))
	return fence, raw, nil
}

// phase is a stretch of a run whose use of the machine is logged at its end: the fence and the raw
// updates run beside the same load, and what each costs beyond it, who waited for a core, and how
// long kube-apiserver took over the partitions' status requests, tells their times apart.
type phase struct {
	s            *scaleRun
	began        time.Time
	cpu, waiting scaleCPU
	server       map[string]requestTime // kube-apiserver's status request times so far
}

func (s *scaleRun) startPhase(ctx context.Context) phase {
	server := statusRequestTimes(ctx, s.env.Config)
	return phase{s: s, began: time.Now(), cpu: s.sampleCPU(), waiting: s.sampleRunQueueWaits(), server: server}
}

// phaseEnd is what a phase leaves for the lines logged after the load has stopped.
type phaseEnd struct {
	loopEnd     time.Duration // the open loop's clock when the phase ended
	serverTimes string        // kube-apiserver's status request times over the phase, described
}

// end logs the phase's CPU and run-queue waits, process by process, and returns when it ended on
// loop's clock and kube-apiserver's request times over it.
func (p phase) end(ctx context.Context, name string, loop *openLoop) phaseEnd {
	ended := phaseEnd{loopEnd: loop.now()}
	seconds := time.Since(p.began).Seconds()
	cpu, waiting := p.s.sampleCPU().minus(p.cpu), p.s.sampleRunQueueWaits().minus(p.waiting)
	fmt.Fprintf(p.s.log, "bench: scale-%d: during %s (%.2f s) the machine was %s; waited for a core: %s\n",
		p.s.n, name, seconds, cpu.describe(seconds), waiting.describeWaits(seconds))
	ended.serverTimes = describeRequestTimes(p.server, statusRequestTimes(ctx, p.s.env.Config))
	return ended
}

// logFenceRequests says what the operator sent the API server during the fence: a patch per fenced
// partition, and the rest (its groups' status writes, the live reads of the leader's pod, Events),
// and how long its patches took on average.
func (s *scaleRun) logFenceRequests(before, after *requestCounts, fenced int) {
	if before == nil || after == nil {
		fmt.Fprintf(s.log, "bench: scale-%d: the operator's request counts could not be read\n", s.n)
		return
	}
	sent := func(method string) int { return int(after.byMethod[method] - before.byMethod[method]) }
	patches := sent(http.MethodPatch)
	fmt.Fprintf(s.log, "bench: scale-%d: during the fence the operator sent %d PATCH (%d partitions fenced, so %d other: group status writes; %.1f ms each on average), %d GET, %d POST, %d PUT\n",
		s.n, patches, fenced, patches-fenced, 1000*(after.patchSeconds-before.patchSeconds)/float64(max(patches, 1)),
		sent(http.MethodGet), sent(http.MethodPost), sent(http.MethodPut))
}

// fenceVictims deletes the victim broker's pod and times until the operator has fenced every
// partition it led, watching them from a list made before the clock starts: listing the namespace's
// thousands of partitions (about 5 KB each) while the fences run would load the API server with the
// bench's own list, which the raw baseline does not have.
func (s *scaleRun) fenceVictims(ctx context.Context, ns string, victims map[string]bool) (time.Duration, error) {
	var before sharestatev1.SharePartitionStateList
	if err := s.client.List(ctx, &before, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("listing the partitions before the fence: %w", err)
	}
	for i := range before.Items {
		if victims[before.Items[i].Name] && before.Items[i].Status.StateEpoch > benchEpoch {
			return 0, fmt.Errorf("partition %s is fenced before its leader's pod is deleted", before.Items[i].Name)
		}
	}
	fmt.Fprintf(s.log, "bench: scale-%d: deleting the broker pod that leads %d partitions, the load running\n", s.n, len(victims))
	w := s.watchRaised(ctx, ns, &before, victims)
	start := time.Now()
	if err := s.client.Delete(ctx, s.cluster.victim); err != nil {
		_ = w.stop() // the deletion's error says why
		return 0, fmt.Errorf("deleting the victim broker's pod: %w", err)
	}
	if err := w.wait(); err != nil {
		return 0, fmt.Errorf("%d of %d partitions fenced: %w", len(w.raised), len(w.listed), err)
	}
	fmt.Fprintf(s.log, "bench: scale-%d: partitions fenced after %s; the bench's watch of %s decoded %d events meanwhile\n",
		s.n, w.describeSince(start), ns, w.events)
	return w.last().Sub(start), nil
}

// rawUpdates raises the victims' state epochs with plain status updates, operator.DefaultMaxConcurrentReconciles
// at a time, from objects read beforehand (as the operator's cache holds them), and times them as the
// fence is timed: until a watch of the namespace has seen every epoch raised.
func (s *scaleRun) rawUpdates(ctx context.Context, ns string, victims map[string]bool) (time.Duration, error) {
	var list sharestatev1.SharePartitionStateList
	if err := s.client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	var objs []*sharestatev1.SharePartitionState
	for i := range list.Items {
		if victims[list.Items[i].Name] {
			objs = append(objs, &list.Items[i])
		}
	}
	w := s.watchRaised(ctx, ns, &list, victims)
	var took atomic.Int64 // nanoseconds, over all updates
	start := time.Now()
	err := parallelDo(ctx, len(objs), operator.DefaultMaxConcurrentReconciles, func(i int) error {
		objs[i].Status.StateEpoch++
		sent := time.Now()
		defer func() { took.Add(int64(time.Since(sent))) }()
		return s.client.Status().Update(ctx, objs[i])
	})
	answered := time.Since(start)
	if err != nil {
		_ = w.stop() // the update's error says why
		return 0, err
	}
	if err := w.wait(); err != nil {
		return 0, fmt.Errorf("%d of %d raw updates seen: %w", len(w.raised), len(w.listed), err)
	}
	fmt.Fprintf(s.log, "bench: scale-%d: %d raw updates answered after %.2f s, %.1f ms each on average; seen raised after %s; the bench's watch of %s decoded %d events meanwhile\n",
		s.n, len(objs), answered.Seconds(), float64(took.Load())/1e6/float64(max(len(objs), 1)), w.describeSince(start), ns, w.events)
	return w.last().Sub(start), nil
}

// raisedWatch follows a namespace's partitions from a list's resourceVersion and notes when each
// of a set of them is first seen with a state epoch above the one it was listed with. The fence and
// its raw baseline are both timed by one. The operator's fences can be seen no other way, and the
// watch costs the machine: kube-apiserver sends it every write of the namespace, the load's
// included, and the bench decodes them. Until run 60 the baseline was timed by its updates' own
// answers, without a watch, and so the ratio charged the fence for the bench's watch too (run 61).
type raisedWatch struct {
	listed map[string]int32 // the partitions followed, by name: their state epoch when listed
	seen   map[string]bool
	raised []time.Time // when each partition was first seen raised, in that order
	events int         // every event the watch decoded

	cancel context.CancelFunc
	done   chan error
}

// watchRaised starts a raisedWatch of the partitions of list (namespace ns) whose names are in names.
func (s *scaleRun) watchRaised(ctx context.Context, ns string, list *sharestatev1.SharePartitionStateList, names map[string]bool) *raisedWatch {
	w := newRaisedWatch(list, names)
	watchCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	w.cancel = cancel
	go func() {
		w.done <- testenv.FollowFrom(watchCtx, s.client, &sharestatev1.SharePartitionStateList{}, ns, list.ResourceVersion, w.note)
	}()
	return w
}

func newRaisedWatch(list *sharestatev1.SharePartitionStateList, names map[string]bool) *raisedWatch {
	w := &raisedWatch{listed: map[string]int32{}, seen: map[string]bool{}, done: make(chan error, 1)}
	for i := range list.Items {
		if p := &list.Items[i]; names[p.Name] {
			w.listed[p.Name] = p.Status.StateEpoch
		}
	}
	return w
}

// note takes one event of the watch; it reports true once every followed partition was seen raised.
func (w *raisedWatch) note(ev watch.EventType, obj client.Object) bool {
	w.events++
	sps, ok := obj.(*sharestatev1.SharePartitionState)
	if !ok || ev == watch.Deleted || w.seen[sps.Name] {
		return w.complete()
	}
	if listed, followed := w.listed[sps.Name]; followed && sps.Status.StateEpoch > listed {
		w.seen[sps.Name] = true
		w.raised = append(w.raised, time.Now())
	}
	return w.complete()
}

func (w *raisedWatch) complete() bool { return len(w.raised) == len(w.listed) }

// wait returns when the watch has seen every followed partition raised, or why it has not; the
// watch's fields may be read after it.
func (w *raisedWatch) wait() error {
	defer w.cancel()
	err := <-w.done
	if err == nil && !w.complete() {
		err = errors.New("the watch ended early")
	}
	return err
}

// stop ends the watch without waiting for the rest of the partitions, and returns its error, which
// is most likely its cancellation's.
func (w *raisedWatch) stop() error {
	w.cancel()
	return <-w.done
}

// last is when the last followed partition was seen raised; call it after wait succeeded.
func (w *raisedWatch) last() time.Time { return w.raised[len(w.raised)-1] }

// describeSince says when, after start, the first, a tenth, half, nine tenths and all of the
// followed partitions were seen raised; call it after wait succeeded.
func (w *raisedWatch) describeSince(start time.Time) string {
	at := func(fraction float64) float64 {
		return w.raised[int(fraction*float64(len(w.raised)-1))].Sub(start).Seconds()
	}
	return fmt.Sprintf("%.2f s (the first), %.2f s (a tenth), %.2f s (half), %.2f s (nine tenths), %.2f s (all)",
		at(0), at(0.1), at(0.5), at(0.9), at(1))
}
