package bench

import (
	"context"
	"fmt"
	"math"
	"time"
)

// persisterCounts are what the sidecars' persisters counted so far, added over the sidecars: the
// bench sets them beside its own view of a window's writes, to tell the time a write spent in the
// persister (queued for its partition, then the API request) from the time it spent on the way.
type persisterCounts struct {
	writes, writeSeconds float64 // Writes answered, and their time from being queued to the answer
	updates, conflicts   float64 // status updates sent, and those refused with a conflict
	apiRequests          float64 // every request to the API server
	gets, succeeded      float64 // of them, the reads of an object, and those whose outcome was success
}

// samplePersisters reads the sidecars' persister metrics; nil when one cannot be read.
func (s *scaleRun) samplePersisters(ctx context.Context) *persisterCounts {
	var c persisterCounts
	for _, addr := range s.sidecarMetrics {
		samples, err := scrape(ctx, addr)
		if err != nil {
			fmt.Fprintf(s.log, "bench: scale-%d: reading a sidecar's metrics: %v\n", s.n, err)
			return nil
		}
		c.writes += orZero(samples.sum("sharestate_persister_write_duration_seconds_count", ""))
		c.writeSeconds += orZero(samples.sum("sharestate_persister_write_duration_seconds_sum", ""))
		c.updates += orZero(samples.sum("sharestate_persister_writes_per_update_count", ""))
		c.conflicts += orZero(samples.sum("sharestate_persister_conflicts_total", ""))
		c.apiRequests += orZero(samples.sum("sharestate_persister_api_requests_total", ""))
		c.gets += orZero(samples.sum("sharestate_persister_api_requests_total", `verb="get"`))
		c.succeeded += orZero(samples.sum("sharestate_persister_api_requests_total", `outcome="success"`))
	}
	return &c
}

// orZero is v, or 0 for a metric not exposed yet (NaN).
func orZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

func (c persisterCounts) minus(before persisterCounts) persisterCounts {
	return persisterCounts{writes: c.writes - before.writes, writeSeconds: c.writeSeconds - before.writeSeconds,
		updates: c.updates - before.updates, conflicts: c.conflicts - before.conflicts,
		apiRequests: c.apiRequests - before.apiRequests, gets: c.gets - before.gets, succeeded: c.succeeded - before.succeeded}
}

// describe tells a window's counts. The requests not successful are conflicts, objects not found or
// already there, the API server unavailable or refusing (the persister's outcome label).
func (c persisterCounts) describe() string {
	if c.writes == 0 {
		return "no writes answered"
	}
	return fmt.Sprintf("%.0f writes answered in %.1f ms on average (queued to answered), %.0f status updates, "+
		"%.0f conflicts, %.2f API requests per write (%.0f GETs, %.0f not successful)", c.writes, 1000*c.writeSeconds/c.writes, c.updates,
		c.conflicts, c.apiRequests/c.writes, c.gets, c.apiRequests-c.succeeded)
}

// meanLatency is the mean of latencies (0 for none).
func meanLatency(latencies []time.Duration) time.Duration {
	if len(latencies) == 0 {
		return 0
	}
	var total time.Duration
	for _, l := range latencies {
		total += l
	}
	return total / time.Duration(len(latencies))
}
