package bench

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// TestWritesAreValidAndKeepTheStateBounded applies many writes the way the raw scenarios do and checks
// that every write passes the persister's input validation, that the stored state settles at the size
// the workload promises, and that each write's delivery-complete count is true of the state it leaves.
func TestWritesAreValidAndKeepTheStateBounded(t *testing.T) {
	topic, err := sharestate.ParseTopicID(topicIDText)
	if err != nil {
		t.Fatal(err)
	}
	status := v1alpha1.SharePartitionStateStatus{StateEpoch: benchEpoch, LeaderEpoch: benchEpoch, StartOffset: baseOffset}
	var cursor offsetCursor
	const writes = 500
	var last stateWrite
	for i := range writes {
		last = cursor.next()
		p := sharestate.WritePartition{
			StateEpoch: benchEpoch, LeaderEpoch: benchEpoch, StartOffset: last.startOffset,
			DeliveryCompleteCount: last.deliveryCompleteCount, StateBatches: last.batches,
		}
		if o := sharestate.CheckWriteInput(topic, p, sharestate.DefaultLimits); !o.OK() {
			t.Fatalf("write %d: %s: %s", i, o.Code, o.Message)
		}
		if err := applyWrite(&status, last, metav1.NewTime(time.Unix(int64(i), 0))); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		batches := decode(t, status.StateBatches)
		if got := completeFrom(batches, status.StartOffset); got != int64(status.DeliveryCompleteCount) {
			t.Fatalf("write %d: %d offsets complete at or above %d, the write says %d", i, got, status.StartOffset, status.DeliveryCompleteCount)
		}
	}

	newest := baseOffset + (writes-1)*offsetsPerWrite
	if want := newest - trailingOffsets; status.StartOffset != want {
		t.Errorf("start offset %d, want %d (the newest write's first offset less %d)", status.StartOffset, want, trailingOffsets)
	}
	if want := int(3 * (trailingOffsets/offsetsPerWrite + 1)); len(status.StateBatches) != want {
		t.Errorf("%d stored batches, want %d", len(status.StateBatches), want)
	}
	if status.WriteCount != writes || !status.WriteTime.Equal(&metav1.Time{Time: time.Unix(writes-1, 0)}) {
		t.Errorf("writeCount %d, writeTime %v: want %d and the last write's time", status.WriteCount, status.WriteTime, writes)
	}
	if got, want := string(status.StateBatches[len(status.StateBatches)-1]), sharestate.FormatBatch(last.batches[2]); got != want {
		t.Errorf("last stored batch %q, want the last write's %q", got, want)
	}
}

// TestCursorWritesDisjointOffsets checks that concurrent writers of one partition, which share a
// cursor, never write the same offset twice.
func TestCursorWritesDisjointOffsets(t *testing.T) {
	var cursor offsetCursor
	seen := map[int64]bool{}
	for range 100 {
		for _, b := range cursor.next().batches {
			for o := b.FirstOffset; o <= b.LastOffset; o++ {
				if seen[o] {
					t.Fatalf("offset %d written twice", o)
				}
				seen[o] = true
			}
		}
	}
	if len(seen) != 100*int(offsetsPerWrite) {
		t.Errorf("%d offsets written, want %d: the writes leave gaps", len(seen), 100*offsetsPerWrite)
	}
}

func decode(t *testing.T, stored []v1alpha1.StateBatch) []sharestate.StateBatch {
	t.Helper()
	s := make([]string, len(stored))
	for i, b := range stored {
		s[i] = string(b)
	}
	batches, err := sharestate.DecodeBatches(s)
	if err != nil {
		t.Fatal(err)
	}
	return batches
}

// completeFrom counts the acknowledged or archived offsets at or above start.
func completeFrom(batches []sharestate.StateBatch, start int64) int64 {
	var n int64
	for _, b := range batches {
		if b.DeliveryState != sharestate.DeliveryStateAcknowledged && b.DeliveryState != sharestate.DeliveryStateArchived {
			continue
		}
		n += b.LastOffset - max(b.FirstOffset, start) + 1
	}
	return n
}
