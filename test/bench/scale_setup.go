package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// The scale scenario's cluster: partitions in groups of scaleGroupSize, the groups spread round robin
// over scaleNamespaces namespaces. In each namespace one broker pod (the load broker) leads the
// partitions the write load goes to, through its sidecar; in the first namespace a second broker pod
// (the victim) leads whole groups, up to scaleMaxVictims partitions, and is deleted to time the fences.
const (
	scaleNamespaces = 2
	scaleGroupSize  = 50
	scaleMaxVictims = 1000
	// scaleSetupWorkers bounds the groups being initialized at once: enough to keep the API server
	// busy on two cores, not so many that its requests time out.
	scaleSetupWorkers = 8
)

// The brokers of every namespace, by pod name and broker id.
const (
	loadBroker   = "broker-1"
	loadBrokerID = 1
	victimBroker = "broker-2"
)

// scaleGroup is one share group of the layout.
type scaleGroup struct {
	namespace  string
	id         string
	partitions int
	victim     bool // led by the victim broker, not written to
}

// scaleLayout is where the partitions of one size are.
type scaleLayout struct {
	namespaces []string
	groups     []scaleGroup
	victims    int // partitions the victim broker leads
}

// newScaleLayout spreads n partitions over groups and namespaces. The victim broker leads whole
// groups of the first namespace: a quarter of the partitions, at most scaleMaxVictims. The other
// groups, the load's, alternate over the namespaces, so that each load broker leads as many of them
// and any stretch of the load's round robin goes to the sidecars in equal parts. Until run 49 the
// victims took every other group of the first namespace's first ones, which left a run of 1,000
// partitions of the second namespace alone in the round robin: each pass over it held the load to
// one sidecar's client-side limit, and one capacity window in three fell to 0.75 of the others
// (runs 47 to 49).
func newScaleLayout(n int) scaleLayout {
	size := scaleGroupSize
	if n < 10*scaleGroupSize {
		size = max(1, n/10) // small runs still have several groups per namespace
	}
	l := scaleLayout{}
	for i := range scaleNamespaces {
		l.namespaces = append(l.namespaces, fmt.Sprintf("scale-%d", i))
	}
	victimGroups := max(1, min(scaleMaxVictims, n/4)/size)
	loadGroups := 0
	for i, left := 0, n; left > 0; i++ {
		g := scaleGroup{id: fmt.Sprintf("group-%04d", i), partitions: min(size, left)}
		if i < victimGroups {
			g.namespace, g.victim = l.namespaces[0], true
			l.victims += g.partitions
		} else {
			g.namespace = l.namespaces[loadGroups%scaleNamespaces]
			loadGroups++
		}
		l.groups = append(l.groups, g)
		left -= g.partitions
	}
	return l
}

// scaleCluster is a layout created on a control plane: its namespaces, broker pods and partitions.
type scaleCluster struct {
	scaleLayout
	loadPods map[string]*corev1.Pod // by namespace
	victim   *corev1.Pod
}

// createScaleCluster creates the namespaces, the Ready broker pods and every partition, initialized,
// read (so led) by its broker and written to its steady state, scaleSetupWorkers groups at a time.
func createScaleCluster(ctx context.Context, c client.Client, l scaleLayout) (*scaleCluster, error) {
	sc := &scaleCluster{scaleLayout: l, loadPods: map[string]*corev1.Pod{}}
	persisters := map[string]*persister.Persister{}
	for _, ns := range l.namespaces {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		pod, p, err := readyBroker(ctx, c, ns, loadBroker, loadBrokerID)
		if err != nil {
			return nil, err
		}
		sc.loadPods[ns], persisters[ns+"/"+loadBroker] = pod, p
	}
	pod, p, err := readyBroker(ctx, c, l.namespaces[0], victimBroker, loadBrokerID+1)
	if err != nil {
		return nil, err
	}
	sc.victim, persisters[l.namespaces[0]+"/"+victimBroker] = pod, p
	err = parallelDo(ctx, len(l.groups), scaleSetupWorkers, func(i int) error {
		g := l.groups[i]
		broker := loadBroker
		if g.victim {
			broker = victimBroker
		}
		return initializeGroup(ctx, persisters[g.namespace+"/"+broker], g)
	})
	return sc, err
}

// readyBroker creates a broker pod, marks it Running and Ready, and returns it with a persister that
// stands for it.
func readyBroker(ctx context.Context, c client.Client, ns, name string, id int32) (*corev1.Pod, *persister.Persister, error) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "kafka"}}}}
	if err := c.Create(ctx, pod); err != nil {
		return nil, nil, fmt.Errorf("creating pod %s/%s: %w", ns, name, err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, pod); err != nil {
		return nil, nil, fmt.Errorf("marking pod %s/%s Ready: %w", ns, name, err)
	}
	p, err := persister.New(persister.Options{Client: c, Namespace: ns,
		Identity: persister.Identity{BrokerID: id, PodName: name, PodUID: string(pod.UID)}})
	return pod, p, err
}

// initializeGroup initializes the group's partitions at state epoch benchEpoch, reads them at leader
// epoch benchEpoch, which records p's broker as their leader, and writes their steady state.
func initializeGroup(ctx context.Context, p *persister.Persister, g scaleGroup) error {
	topic := benchTopic
	initReq := sharestate.InitializeRequest{GroupID: g.id, Topics: []sharestate.TopicData[sharestate.InitializePartition]{{TopicID: topic}}}
	readReq := sharestate.ReadRequest{GroupID: g.id, Topics: []sharestate.TopicData[sharestate.ReadPartition]{{TopicID: topic}}}
	for i := range g.partitions {
		initReq.Topics[0].Partitions = append(initReq.Topics[0].Partitions,
			sharestate.InitializePartition{Partition: int32(i), StateEpoch: benchEpoch, StartOffset: baseOffset})
		readReq.Topics[0].Partitions = append(readReq.Topics[0].Partitions, sharestate.ReadPartition{Partition: int32(i), LeaderEpoch: benchEpoch})
	}
	if err := checkAnswers(p.Initialize(ctx, initReq).Topics, g.partitions, resultOf); err != nil {
		return fmt.Errorf("initializing %s/%s: %w", g.namespace, g.id, err)
	}
	read := p.Read(ctx, readReq)
	if err := checkAnswers(read.Topics, g.partitions, func(r sharestate.ReadResult) sharestate.PartitionResult { return r.PartitionResult }); err != nil {
		return fmt.Errorf("reading %s/%s: %w", g.namespace, g.id, err)
	}
	for _, r := range read.Topics[0].Partitions {
		if r.StateEpoch != benchEpoch {
			return fmt.Errorf("%s/%s partition %d: state epoch %d, want %d", g.namespace, g.id, r.Partition, r.StateEpoch, benchEpoch)
		}
	}
	state := steadyState()
	writeReq := sharestate.WriteRequest{GroupID: g.id, Topics: []sharestate.TopicData[sharestate.WritePartition]{{TopicID: topic}}}
	for i := range g.partitions {
		writeReq.Topics[0].Partitions = append(writeReq.Topics[0].Partitions, sharestate.WritePartition{
			Partition: int32(i), StateEpoch: benchEpoch, LeaderEpoch: benchEpoch,
			StartOffset: state.startOffset, DeliveryCompleteCount: state.deliveryCompleteCount, StateBatches: state.batches})
	}
	if err := checkAnswers(p.Write(ctx, writeReq).Topics, g.partitions, resultOf); err != nil {
		return fmt.Errorf("writing the state of %s/%s: %w", g.namespace, g.id, err)
	}
	return nil
}

// steadyStateRuns is how many writes' worth of state every partition holds before the clock starts:
// as many runs of offsets as the start offset trails the newest by, and one. That is the state the
// other scenarios' partitions settle at (about 63 batches, 1.9 KB of status): a cluster's partitions
// carry their in-flight records all the time, and the caches' sizes depend on them.
const steadyStateRuns = trailingOffsets/offsetsPerWrite + 1

// steadyState is the state of steadyStateRuns writes of an offsetCursor, in one write.
func steadyState() stateWrite {
	cursor := &offsetCursor{}
	var state stateWrite
	for range steadyStateRuns {
		w := cursor.next()
		state.batches = append(state.batches, w.batches...)
		state.startOffset, state.deliveryCompleteCount = w.startOffset, w.deliveryCompleteCount
	}
	return state
}

// loadTarget is a partition the write load goes to, through its namespace's sidecar.
type loadTarget struct {
	namespace string
	store     sharestate.Store
	group     string
	partition int32
	cursor    *offsetCursor
}

// loadTargets lists the partitions of the load brokers, each with the store of its namespace.
func (l scaleLayout) loadTargets(stores map[string]sharestate.Store) []loadTarget {
	var out []loadTarget
	for _, g := range l.groups {
		if g.victim {
			continue
		}
		for p := range g.partitions {
			cursor := &offsetCursor{}
			cursor.n.Store(steadyStateRuns) // the load goes on from the state the setup wrote
			out = append(out, loadTarget{namespace: g.namespace, store: stores[g.namespace], group: g.id, partition: int32(p), cursor: cursor})
		}
	}
	return out
}

// readThroughSidecars reads every load partition through its namespace's sidecar, a Read per group,
// as a share-partition leader reads a partition's state when it takes the partition on
// (pkg/sharestate/leader, SharePartition's initialization): the sidecar's persister then holds each
// object, and the load's writes are the steady state's, one status update each. Without it every
// write of the load was its partition's first through the sidecar since it started, and read the
// object before it updated it: two API requests a write. It runs once the operator has written its
// conditions, so that the objects read are those the load's writes find.
func (l scaleLayout) readThroughSidecars(ctx context.Context, stores map[string]sharestate.Store) error {
	var groups []scaleGroup
	for _, g := range l.groups {
		if !g.victim {
			groups = append(groups, g)
		}
	}
	return parallelDo(ctx, len(groups), 8, func(i int) error {
		g := groups[i]
		req := sharestate.ReadRequest{GroupID: g.id, Topics: []sharestate.TopicData[sharestate.ReadPartition]{{TopicID: benchTopic}}}
		for p := range g.partitions {
			req.Topics[0].Partitions = append(req.Topics[0].Partitions, sharestate.ReadPartition{Partition: int32(p), LeaderEpoch: benchEpoch})
		}
		read := stores[g.namespace].Read(ctx, req)
		if err := checkAnswers(read.Topics, g.partitions, func(r sharestate.ReadResult) sharestate.PartitionResult { return r.PartitionResult }); err != nil {
			return fmt.Errorf("reading %s/%s through its sidecar: %w", g.namespace, g.id, err)
		}
		return nil
	})
}

// roundRobinWrites returns a writeFunc that writes the targets in turn: every partition is written as
// often as the others, as acknowledgements spread over a cluster's partitions.
func roundRobinWrites(targets []loadTarget) writeFunc {
	topic := benchTopic
	var next atomic.Int64
	return func(ctx context.Context) error {
		t := targets[(next.Add(1)-1)%int64(len(targets))]
		w := t.cursor.next()
		in := sharestate.WritePartition{Partition: t.partition, StateEpoch: benchEpoch, LeaderEpoch: benchEpoch,
			StartOffset: w.startOffset, DeliveryCompleteCount: w.deliveryCompleteCount, StateBatches: w.batches}
		resp := t.store.Write(ctx, sharestate.WriteRequest{GroupID: t.group, Topics: []sharestate.TopicData[sharestate.WritePartition]{
			{TopicID: topic, Partitions: []sharestate.WritePartition{in}},
		}})
		return checkAnswers(resp.Topics, 1, resultOf)
	}
}

// victimNames returns the names of the victim broker's partitions.
func (l scaleLayout) victimNames() map[string]bool {
	names := map[string]bool{}
	for _, g := range l.groups {
		if !g.victim {
			continue
		}
		for p := range g.partitions {
			names[sharestatev1.SharePartitionStateName(g.id, topicIDText, int32(p))] = true
		}
	}
	return names
}

// parallelDo runs fn(0..n-1) on workers goroutines and returns the first error; after one, the
// calls not started yet are skipped.
func parallelDo(ctx context.Context, n, workers int, fn func(int) error) error {
	var (
		wg       sync.WaitGroup
		next     atomic.Int64
		once     sync.Once
		firstErr error
		failed   atomic.Bool
	)
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() || ctx.Err() != nil {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}
