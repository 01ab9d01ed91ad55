// Package fencebench measures how fast the operator fences a dead broker's partitions: one broker pod
// leads N partitions, the pod is deleted, and the clock runs until every partition's state epoch has
// been raised. The baseline, measured in the same run on the same objects, is N raw parallel status
// updates with as many workers as the operator's fencing reconciler runs.
package fencebench

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/operator"
)

// Result is one measurement.
type Result struct {
	Partitions int
	Workers    int
	// Fence is from the pod's deletion to the last partition's fence being visible.
	Fence time.Duration
	// Raw is the same number of status updates, made directly with Workers goroutines.
	Raw time.Duration
}

// Line renders the result the way `make bench` prints it.
func (r Result) Line(name string) string {
	return fmt.Sprintf("scenario=%s seconds=%.3f raw_seconds=%.3f ratio=%.2f workers=%d",
		name, r.Fence.Seconds(), r.Raw.Seconds(), r.Fence.Seconds()/r.Raw.Seconds(), r.Workers)
}

// Run measures fencing of partitions partitions in a fresh namespace of the cluster cfg reaches.
// workers is the fencing reconciler's concurrency (and the baseline's).
func Run(ctx context.Context, cfg *rest.Config, partitions, workers int) (Result, error) {
	res := Result{Partitions: partitions, Workers: workers}
	scheme, err := operator.Scheme()
	if err != nil {
		return res, err
	}
	// The operator runs with its own defaults (client-side limits included); the bench's client, and
	// so the baseline, has none.
	operatorCfg := rest.CopyConfig(cfg)
	operatorCfg.QPS, operatorCfg.Burst = 0, 0
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, -1
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return res, err
	}
	ns, pod, err := setUp(ctx, c, partitions, workers)
	if err != nil {
		return res, err
	}
	if res.Fence, err = measureFence(ctx, operatorCfg, c, ns, pod, partitions, workers); err != nil {
		return res, err
	}
	if res.Raw, err = measureRaw(ctx, c, scheme, ns, workers); err != nil {
		return res, err
	}
	return res, nil
}

// setUp creates a namespace, a Ready broker pod and the partitions it leads.
func setUp(ctx context.Context, c client.Client, partitions, workers int) (string, *corev1.Pod, error) {
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "fence-bench-"}}
	if err := c.Create(ctx, nsObj); err != nil {
		return "", nil, err
	}
	ns := nsObj.Name
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broker-0"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "kafka"}}}}
	if err := c.Create(ctx, pod); err != nil {
		return "", nil, err
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, pod); err != nil {
		return "", nil, err
	}
	err := parallel(partitions, workers, func(i int) error { return createLedPartition(ctx, c, ns, pod, int32(i)) })
	return ns, pod, err
}

func createLedPartition(ctx context.Context, c client.Client, ns string, pod *corev1.Pod, partition int32) error {
	const topic = "q1Sh0o2QRbuBzMz8vEMbvQ"
	sps := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.SharePartitionStateName("bench", topic, partition)},
		Spec:       sharestatev1.SharePartitionStateSpec{GroupID: "bench", TopicID: topic, Partition: partition},
	}
	if err := c.Create(ctx, sps); err != nil {
		return err
	}
	now := metav1.Now()
	sps.Status = sharestatev1.SharePartitionStateStatus{
		StateEpoch: 1, LeaderEpoch: 1, StartOffset: 0, CreateTime: &now, WriteTime: &now,
		StateBatches: []sharestatev1.StateBatch{"0-9/2/1", "10-19/0/1"},
		Leader:       &sharestatev1.LeaderRef{BrokerID: 0, PodName: pod.Name, PodUID: string(pod.UID), LeaderEpoch: 1, Since: now},
	}
	return c.Status().Update(ctx, sps)
}

// measureFence runs the operator until it has seen every partition led by a live broker, deletes the
// broker's pod and times until every partition is fenced, watching (not polling) the objects.
func measureFence(ctx context.Context, cfg *rest.Config, c client.WithWatch, ns string, pod *corev1.Pod, partitions, workers int) (time.Duration, error) {
	opCtx, stop := context.WithCancel(ctx)
	defer stop()
	mgr, err := operator.NewManager(opCtx, cfg, operator.Options{
		MetricsBindAddress: "0", HealthProbeBindAddress: "0", MaxConcurrentReconciles: workers, WatchNamespaces: []string{ns},
	})
	if err != nil {
		return 0, err
	}
	done := make(chan struct{})
	var mgrErr error
	go func() {
		defer close(done)
		mgrErr = mgr.Start(opCtx)
	}()
	defer func() { stop(); <-done }()

	alive := func(s *sharestatev1.SharePartitionState) bool {
		c := meta.FindStatusCondition(s.Status.Conditions, sharestatev1.ConditionFenced)
		return c != nil && c.Reason == sharestatev1.ReasonLeaderAlive
	}
	if _, err := waitFor(ctx, c, ns, partitions, alive); err != nil {
		select {
		case <-done:
			return 0, fmt.Errorf("the operator stopped: %w", mgrErr)
		default:
		}
		return 0, fmt.Errorf("waiting for the operator to see the live leader: %w", err)
	}
	fenced := func(s *sharestatev1.SharePartitionState) bool { return s.Status.StateEpoch >= 2 }
	start := time.Now()
	if err := c.Delete(ctx, pod); err != nil {
		return 0, err
	}
	end, err := waitFor(ctx, c, ns, partitions, fenced)
	if err != nil {
		return 0, fmt.Errorf("waiting for the fences: %w", err)
	}
	return end.Sub(start), nil
}

// measureRaw times one status update of each partition (raising the state epoch) with workers
// goroutines, from objects read beforehand, as the operator's cache would have them.
func measureRaw(ctx context.Context, c client.Client, _ *runtime.Scheme, ns string, workers int) (time.Duration, error) {
	var list sharestatev1.SharePartitionStateList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	start := time.Now()
	err := parallel(len(list.Items), workers, func(i int) error {
		sps := &list.Items[i]
		sps.Status.StateEpoch++
		return c.Status().Update(ctx, sps)
	})
	return time.Since(start), err
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(int) error) error {
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var firstErr error
feed:
	for i := range n {
		select {
		case next <- i:
		case firstErr = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if firstErr == nil {
		firstErr = <-errs
	}
	return firstErr
}
