package v1alpha1

import (
	"testing"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// TestMaxPartitionsIsThePersisters: the persister refuses, as an unknown partition, every partition
// the schema would refuse to store, and no other.
func TestMaxPartitionsIsThePersisters(t *testing.T) {
	if MaxPartitions != sharestate.MaxPartitions {
		t.Fatalf("the schema bounds partitions at %d, the persister at %d", MaxPartitions, sharestate.MaxPartitions)
	}
}
