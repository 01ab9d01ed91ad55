package bench

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// writeFunc does one write; a goroutine calls it back to back for the whole run.
type writeFunc func(ctx context.Context) error

// scenario is one measurement: setup prepares the objects in a namespace of the scenario's own,
// before the clock starts, and returns one writeFunc per concurrent writer.
type scenario struct {
	name  string
	setup func(ctx context.Context, c client.Client, namespace string) ([]writeFunc, error)
}

// The scenarios, in the order they run.
var scenarios = []scenario{
	{name: "raw-update", setup: rawUpdates(1)},
	{name: "naive", setup: naiveWrites},
	{name: "persister-1x1", setup: persisterWrites(1, 1)},
	{name: "persister-64x1", setup: persisterWrites(64, 1)},
	{name: "persister-4x200", setup: persisterWrites(4, 200)},
	{name: "raw-update-parallel", setup: rawUpdates(200)},
}

// ScenarioNames lists the scenarios in the order they run.
func ScenarioNames() []string {
	names := make([]string, len(scenarios))
	for i, s := range scenarios {
		names[i] = s.name
	}
	return names
}

// rawUpdates is the baseline: one writer per object, each write one status update of an object it
// holds from the previous update's response. partitions writers run at once, one per object.
func rawUpdates(partitions int) func(context.Context, client.Client, string) ([]writeFunc, error) {
	return func(ctx context.Context, c client.Client, namespace string) ([]writeFunc, error) {
		states, err := createStates(ctx, c, namespace, partitions)
		if err != nil {
			return nil, err
		}
		writers := make([]writeFunc, len(states))
		for i, obj := range states {
			cursor := &offsetCursor{}
			writers[i] = func(ctx context.Context) error {
				if err := applyWrite(&obj.Status, cursor.next(), metav1.Now()); err != nil {
					return err
				}
				// Update refreshes obj, resourceVersion included, from the response.
				return c.Status().Update(ctx, obj)
			}
		}
		return writers, nil
	}
}

// naiveWrites is the obvious persister: per write, GET the object, combine, UPDATE its status, and
// start over on a conflict. One writer, one partition.
func naiveWrites(ctx context.Context, c client.Client, namespace string) ([]writeFunc, error) {
	states, err := createStates(ctx, c, namespace, 1)
	if err != nil {
		return nil, err
	}
	key := client.ObjectKeyFromObject(states[0])
	cursor := &offsetCursor{}
	write := func(ctx context.Context) error {
		w := cursor.next()
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			var obj v1alpha1.SharePartitionState
			if err := c.Get(ctx, key, &obj); err != nil {
				return err
			}
			if err := applyWrite(&obj.Status, w, metav1.Now()); err != nil {
				return err
			}
			return c.Status().Update(ctx, &obj)
		})
	}
	return []writeFunc{write}, nil
}

// persisterWrites runs writersPerPartition concurrent writers on each of partitions partitions, all
// through one persister.Persister. The partitions are initialized and read (which records the leader
// epoch) before the clock starts; every write sends the epochs the Read answered.
func persisterWrites(writersPerPartition, partitions int) func(context.Context, client.Client, string) ([]writeFunc, error) {
	return func(ctx context.Context, c client.Client, namespace string) ([]writeFunc, error) {
		p, stateEpochs, err := ledPartitions(ctx, c, namespace, partitions)
		if err != nil {
			return nil, err
		}
		writers := make([]writeFunc, 0, writersPerPartition*partitions)
		for partition, stateEpoch := range stateEpochs {
			cursor := &offsetCursor{}
			for range writersPerPartition {
				writers = append(writers, persisterWriter(p, benchTopic, int32(partition), stateEpoch, cursor))
			}
		}
		return writers, nil
	}
}

// persisterWriter writes the cursor's next write to one partition through p (the persister, or a
// client of the sidecar), as its leader at benchEpoch holding stateEpoch.
func persisterWriter(p sharestate.Store, topic sharestate.TopicID, partition, stateEpoch int32, cursor *offsetCursor) writeFunc {
	return func(ctx context.Context) error {
		w := cursor.next()
		in := sharestate.WritePartition{
			Partition: partition, StateEpoch: stateEpoch, LeaderEpoch: benchEpoch,
			StartOffset: w.startOffset, DeliveryCompleteCount: w.deliveryCompleteCount, StateBatches: w.batches,
		}
		resp := p.Write(ctx, sharestate.WriteRequest{GroupID: groupID, Topics: []sharestate.TopicData[sharestate.WritePartition]{
			{TopicID: topic, Partitions: []sharestate.WritePartition{in}},
		}})
		return checkAnswers(resp.Topics, 1, resultOf)
	}
}

// ledPartitions returns a persister of the bench's broker in namespace that has initialized
// partitions 0..n-1 of benchTopic and read them (which records it as their leader), and each one's
// state epoch.
func ledPartitions(ctx context.Context, c client.Client, namespace string, n int) (*persister.Persister, []int32, error) {
	p, err := persister.New(persister.Options{Client: c, Namespace: namespace, Identity: identity})
	if err != nil {
		return nil, nil, err
	}
	stateEpochs, err := initializeAndRead(ctx, p, benchTopic, n)
	return p, stateEpochs, err
}

// initializeAndRead initializes partitions 0..n-1 at state epoch benchEpoch and start offset
// baseOffset, then reads them with leader epoch benchEpoch, and returns each one's state epoch.
func initializeAndRead(ctx context.Context, p *persister.Persister, topic sharestate.TopicID, n int) ([]int32, error) {
	initReq := sharestate.InitializeRequest{GroupID: groupID, Topics: []sharestate.TopicData[sharestate.InitializePartition]{{TopicID: topic}}}
	readReq := sharestate.ReadRequest{GroupID: groupID, Topics: []sharestate.TopicData[sharestate.ReadPartition]{{TopicID: topic}}}
	for i := range n {
		initReq.Topics[0].Partitions = append(initReq.Topics[0].Partitions,
			sharestate.InitializePartition{Partition: int32(i), StateEpoch: benchEpoch, StartOffset: baseOffset})
		readReq.Topics[0].Partitions = append(readReq.Topics[0].Partitions,
			sharestate.ReadPartition{Partition: int32(i), LeaderEpoch: benchEpoch})
	}
	if err := checkAnswers(p.Initialize(ctx, initReq).Topics, n, resultOf); err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	read := p.Read(ctx, readReq)
	if err := checkAnswers(read.Topics, n, func(r sharestate.ReadResult) sharestate.PartitionResult { return r.PartitionResult }); err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	epochs := make([]int32, n)
	for _, t := range read.Topics {
		for _, r := range t.Partitions {
			if r.Partition < 0 || int(r.Partition) >= n || r.StartOffset != baseOffset {
				return nil, fmt.Errorf("read: partition %d starts at %d, want one of 0..%d at %d", r.Partition, r.StartOffset, n-1, baseOffset)
			}
			epochs[r.Partition] = r.StateEpoch
		}
	}
	return epochs, nil
}

func resultOf(r sharestate.PartitionResult) sharestate.PartitionResult { return r }

// checkAnswers checks a response: want partitions answered, all of them NONE.
func checkAnswers[R any](topics []sharestate.TopicData[R], want int, result func(R) sharestate.PartitionResult) error {
	got := 0
	for _, t := range topics {
		for _, answer := range t.Partitions {
			got++
			if r := result(answer); r.ErrorCode != sharestate.ErrNone {
				return fmt.Errorf("partition %d: %s: %s", r.Partition, r.ErrorCode, r.ErrorMessage)
			}
		}
	}
	if got != want {
		return fmt.Errorf("%d partitions answered, want %d", got, want)
	}
	return nil
}
