package controllers

import (
	"fmt"
	"testing"
)

// The caches keep the keys used last: the oldest is the one forgotten, and a key in use stays.
func TestBoundedCachesForgetTheLeastRecentlyUsed(t *testing.T) {
	var gone goneUIDs
	gone.add("kept", leaderVerdict{})
	for i := range maxGoneUIDs {
		if _, ok := gone.get("kept"); !ok {
			t.Fatalf("the UID in use was forgotten after %d others", i)
		}
		gone.add(fmt.Sprintf("uid-%d", i), leaderVerdict{})
	}
	if _, ok := gone.get("uid-0"); ok {
		t.Error("the least recently used UID is still remembered beyond the bound")
	}

	var events eventCounter
	for range 3 {
		events.count("leader")
	}
	for i := range maxGoneUIDs - 1 {
		events.count(fmt.Sprintf("other-%d", i))
	}
	if n := events.count("leader"); n != 4 {
		t.Errorf("the leader's fourth count is %d, want 4", n)
	}
	events.count("one more") // evicts other-0, the least recently counted
	if n := events.count("other-0"); n != 1 {
		t.Errorf("a forgotten key counts %d, want 1 again", n)
	}
}
