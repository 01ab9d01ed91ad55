package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestRawWritersAgainstAPIServer drives the raw and naive writers by hand and checks, on the stored
// objects, that every write landed, and, on the counter, what each write costs in requests.
func TestRawWritersAgainstAPIServer(t *testing.T) {
	testenv.Require(t, env)
	const writes = 25
	for _, tt := range []struct {
		name             string
		setup            func(context.Context, client.Client, string) ([]writeFunc, error)
		partitions       int
		requestsPerWrite int64
	}{
		{"raw-update", rawUpdates(2), 2, 1},
		{"naive", naiveWrites, 1, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ns := env.Namespace(t)
			counter := &requestCounter{}
			c, err := (&runner{env: env}).countedClient(counter)
			if err != nil {
				t.Fatal(err)
			}
			writers, err := tt.setup(t.Context(), c, ns)
			if err != nil {
				t.Fatal(err)
			}
			if len(writers) != tt.partitions {
				t.Fatalf("%d writers, want %d", len(writers), tt.partitions)
			}
			before := counter.load()
			for _, write := range writers {
				for range writes {
					if err := write(t.Context()); err != nil {
						t.Fatal(err)
					}
				}
			}
			if n, want := counter.load()-before, tt.requestsPerWrite*writes*int64(tt.partitions); n != want {
				t.Errorf("%d API requests for %d writes to each of %d partitions, want %d", n, writes, tt.partitions, want)
			}
			for p := range tt.partitions {
				var obj v1alpha1.SharePartitionState
				key := client.ObjectKey{Namespace: ns, Name: v1alpha1.SharePartitionStateName(groupID, topicIDText, int32(p))}
				if err := env.Client.Get(t.Context(), key, &obj); err != nil {
					t.Fatal(err)
				}
				wantStart := max(baseOffset, baseOffset+(writes-1)*offsetsPerWrite-trailingOffsets)
				wantBatches := 3 * int((baseOffset+writes*offsetsPerWrite-wantStart)/offsetsPerWrite)
				if obj.Status.WriteCount != writes || obj.Status.StartOffset != wantStart || len(obj.Status.StateBatches) != wantBatches {
					t.Errorf("partition %d: writeCount %d, startOffset %d, %d batches; want %d, %d, %d",
						p, obj.Status.WriteCount, obj.Status.StartOffset, len(obj.Status.StateBatches), writes, wantStart, wantBatches)
				}
			}
		})
	}
}

// TestRunnerMeasuresRawUpdates runs two short rounds of the raw-update scenario end to end.
func TestRunnerMeasuresRawUpdates(t *testing.T) {
	testenv.Require(t, env)
	var log strings.Builder
	r := &runner{env: env, cfg: Config{Warmup: 100 * time.Millisecond, Duration: 500 * time.Millisecond}, cpu: newCPUProbe(), log: &log}
	tr := &trial{scenario: scenarios[0]}
	for round := range 2 {
		r.runRound(t.Context(), tr, round)
	}
	res := tr.result(r.cpu)
	if !res.OK() {
		t.Fatalf("raw-update: %+v\n%s", res, log.String())
	}
	// One request per write, give or take the writes in flight at the window's edges. Two windows of
	// 0.5 s: never shorter; longer by as much as a timer fires late on a loaded machine (a bound that
	// holds there, yet well below the two windows plus warm-ups counted twice over).
	if res.Scenario != "raw-update" || res.Writers != 1 || res.RequestsPerWrite < 0.9 || res.RequestsPerWrite > 1.1 ||
		res.P50Millis <= 0 || res.P99Millis < res.P50Millis || res.Seconds < 1 || res.Seconds > 3 {
		t.Errorf("raw-update: %+v", res)
	}
	if math.Abs(res.WritesPerSecond*res.Seconds-float64(res.Writes)) > 1e-6 {
		t.Errorf("%d writes in %vs reported as %v writes/s", res.Writes, res.Seconds, res.WritesPerSecond)
	}
	if len(res.CPU) != 4 || res.CPU[0].Process != "bench" || res.CPU[1].Process != "kube-apiserver" ||
		res.CPU[2].Process != "etcd" || res.CPU[3].Process != "others" || res.CPU[1].Cores <= 0 {
		t.Errorf("CPU of %+v, want bench, kube-apiserver, etcd and others, the API server busy", res.CPU)
	}
}

// TestPersisterWritersAgainstAPIServer sets up a persister scenario of two writers on each of two
// partitions and checks that its writes land: each partition holds the state its cursor's writes
// leave, as the raw writers' would.
func TestPersisterWritersAgainstAPIServer(t *testing.T) {
	testenv.Require(t, env)
	const writes = 25
	ns := env.Namespace(t)
	counter := &requestCounter{}
	c, err := (&runner{env: env}).countedClient(counter)
	if err != nil {
		t.Fatal(err)
	}
	writers, err := persisterWrites(2, 2)(t.Context(), c, ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(writers) != 4 {
		t.Fatalf("%d writers, want 4", len(writers))
	}
	before := counter.load()
	for range writes {
		for _, write := range writers {
			if err := write(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One status update per write when writes come one at a time; the ShareGroup may be read again
	// once its topology expires (every 10 s).
	if n := counter.load() - before; n < 4*writes || n > 4*writes+3 {
		t.Errorf("%d API requests for %d writes one at a time, want about one each", n, 4*writes)
	}
	for p := range 2 {
		var obj v1alpha1.SharePartitionState
		key := client.ObjectKey{Namespace: ns, Name: v1alpha1.SharePartitionStateName(groupID, topicIDText, int32(p))}
		if err := env.Client.Get(t.Context(), key, &obj); err != nil {
			t.Fatal(err)
		}
		// Two writers share the partition's cursor: 2*writes writes.
		newest := baseOffset + (2*writes-1)*offsetsPerWrite
		wantStart := newest - trailingOffsets
		wantBatches := 3 * int((newest+offsetsPerWrite-wantStart)/offsetsPerWrite)
		if obj.Status.StartOffset != wantStart || len(obj.Status.StateBatches) != wantBatches || obj.Status.LeaderEpoch != benchEpoch {
			t.Errorf("partition %d: startOffset %d, %d batches, leader epoch %d; want %d, %d, %d",
				p, obj.Status.StartOffset, len(obj.Status.StateBatches), obj.Status.LeaderEpoch, wantStart, wantBatches, benchEpoch)
		}
	}
}

// The validation-cost scenario writes both kinds on a real control plane and reads kube-apiserver's
// figures (other tests share the control plane, so only their being there is checked here).
func TestValidationCostAgainstAPIServer(t *testing.T) {
	testenv.Require(t, env)
	res, err := measureValidationCost(t.Context(), env, 5, 20)
	if err != nil {
		t.Fatal(err)
	}
	if res.writes != 20 || !(res.allocKB > 0) || !(res.baselineAllocKB > 0) || res.cpuMS < 0 || res.baselineCPUMS < 0 {
		t.Errorf("implausible figures: %s", res.Line())
	}
}
