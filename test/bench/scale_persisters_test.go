package bench

import (
	"testing"
	"time"
)

// A window's persister counts are the difference of two samples, told per write.
func TestPersisterCountsDescribe(t *testing.T) {
	before := persisterCounts{writes: 100, writeSeconds: 1, updates: 90, conflicts: 1, apiRequests: 95, gets: 5, succeeded: 94}
	after := persisterCounts{writes: 300, writeSeconds: 3, updates: 280, conflicts: 3, apiRequests: 305, gets: 12, succeeded: 301}
	want := "200 writes answered in 10.0 ms on average (queued to answered), 190 status updates, 2 conflicts, " +
		"1.05 API requests per write (7 GETs, 3 not successful)"
	if got := after.minus(before).describe(); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got := (persisterCounts{}).describe(); got != "no writes answered" {
		t.Fatalf("an empty window: %s", got)
	}
}

func TestMeanLatency(t *testing.T) {
	if got := meanLatency([]time.Duration{time.Millisecond, 3 * time.Millisecond}); got != 2*time.Millisecond {
		t.Fatalf("mean of 1 and 3 ms: %s", got)
	}
	if got := meanLatency(nil); got != 0 {
		t.Fatalf("mean of none: %s", got)
	}
}
