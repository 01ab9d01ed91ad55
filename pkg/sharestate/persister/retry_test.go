package persister

import (
	"context"
	"testing"
	"time"
)

// The retries of one operation double from 20 ms up to 1 s, each within ±20 % of that.
func TestBackoffGrowsToItsCapWithJitter(t *testing.T) {
	var b backoff
	mean := 20 * time.Millisecond
	for i := range 12 {
		d := b.next()
		if low, high := mean*8/10, mean*12/10; d < low || d > high {
			t.Fatalf("interval %d: %v, want within [%v, %v]", i, d, low, high)
		}
		mean = min(2*mean, time.Second)
	}
}

func TestBackoffWaitEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var b backoff
	if b.wait(ctx) {
		t.Fatal("wait went on after its context ended")
	}
}
