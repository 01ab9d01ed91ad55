package kafkacluster

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestTimedConsumerReadsWhatIsAppended: each look takes in the whole lines written since the last,
// leaves a line still being written for the next, and answers from all it has read.
func TestTimedConsumerReadsWhatIsAppended(t *testing.T) {
	out := filepath.Join(t.TempDir(), "c.out")
	con := &TimedConsumer{out: out, arrived: map[int32][]time.Time{}}
	appendTo := func(s string) {
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	if s := con.Summary(); s.Records != 0 {
		t.Fatalf("before any output: %+v", s)
	}
	appendTo("1000 0 5 1\n1500 1 7 1\nERROR poll x\n2000 0 6")
	if s := con.Summary(); s.Records != 2 || s.First != time.UnixMilli(1000) || s.Last != time.UnixMilli(1500) {
		t.Fatalf("after two whole lines and a partial one: %+v", s)
	}
	appendTo(" 1\n2500 0 7 2\n")
	if s := con.Summary(); s.Records != 4 || s.Last != time.UnixMilli(2500) {
		t.Fatalf("after the partial line's end and one more: %+v", s)
	}
	if at, ok := con.FirstDelivery(0, time.UnixMilli(1200)); !ok || at != time.UnixMilli(2000) {
		t.Errorf("partition 0 since 1200 ms: %v %v, want 2000 ms", at, ok)
	}
	if _, ok := con.FirstDelivery(1, time.UnixMilli(1600)); ok {
		t.Error("partition 1 since 1600 ms: found a delivery, want none")
	}
}
