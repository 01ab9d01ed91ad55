package fanout

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// Answers come back in the request's order, topic by topic, whatever order they finish in.
func TestPartitionsKeepTheRequestsOrder(t *testing.T) {
	req := sharestate.Request[int32]{Topics: []sharestate.TopicData[int32]{
		{TopicID: sharestate.TopicID{1}, Partitions: []int32{5, 3, 9}},
		{TopicID: sharestate.TopicID{2}, Partitions: []int32{0, 7}},
	}}
	resp := Partitions(context.Background(), req, func(_ context.Context, topic sharestate.TopicID, p int32) [2]int32 {
		time.Sleep(time.Duration(10-p) * time.Millisecond) // the last partitions finish first
		return [2]int32{int32(topic[0]), p}
	})
	want := [][][2]int32{{{1, 5}, {1, 3}, {1, 9}}, {{2, 0}, {2, 7}}}
	for ti, topic := range resp.Topics {
		if topic.TopicID != req.Topics[ti].TopicID {
			t.Fatalf("topic %d is %v, want %v", ti, topic.TopicID, req.Topics[ti].TopicID)
		}
		for pi, got := range topic.Partitions {
			if got != want[ti][pi] {
				t.Fatalf("topic %d partition %d: %v, want %v", ti, pi, got, want[ti][pi])
			}
		}
	}
}

// No more than Limit calls run at once, and every call runs.
func TestRunBoundsConcurrency(t *testing.T) {
	var running, most, calls atomic.Int64
	fns := make([]func(), 3*Limit)
	for i := range fns {
		fns[i] = func() {
			n := running.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			running.Add(-1)
			calls.Add(1)
		}
	}
	Run(fns)
	if calls.Load() != int64(len(fns)) {
		t.Fatalf("%d calls, want %d", calls.Load(), len(fns))
	}
	if most.Load() > Limit {
		t.Fatalf("%d calls at once, more than Limit (%d)", most.Load(), Limit)
	}
}
