package kafkacluster

import (
	"maps"
	"testing"
)

func TestStartOffsets(t *testing.T) {
	// As kafka-share-groups.sh 4.4.0 printed it in test-cluster, with a line of another group.
	out := `
GROUP                     TOPIC           PARTITION  START-OFFSET  LAG
in-pods-rollout-consumers in-pods-rollout 0          2911          0
in-pods-rollout-consumers in-pods-rollout 1          2910          0
other                     in-pods-rollout 2          7             0
in-pods-rollout-consumers in-pods-rollout 2          -             0
`
	got := StartOffsets(out, "in-pods-rollout-consumers")
	if want := map[int32]int64{0: 2911, 1: 2910}; len(got) != 1 || !maps.Equal(got["in-pods-rollout"], want) {
		t.Fatalf("StartOffsets = %v, want in-pods-rollout: %v", got, want)
	}
}
