package persister

import (
	"context"
	"testing"
	"time"
)

// The retries of one operation double from 20 ms up to 1 s, each stretched by at most 40 %.
func TestBackoffGrowsToItsCapWithJitter(t *testing.T) {
	var b backoff
	base := 20 * time.Millisecond
	for i := range 12 {
		d := b.next()
		if d < base || d > base*14/10 {
			t.Fatalf("interval %d: %v, want within [%v, %v]", i, d, base, base*14/10)
		}
		base = min(2*base, time.Second)
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
