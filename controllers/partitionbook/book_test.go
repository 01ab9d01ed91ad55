package partitionbook

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// The book answers nothing until a pass is complete, keeps a summary of each partition, and drops
// what a pass did not see.
func TestPartitionBook(t *testing.T) {
	partition := func(ns, group, name string) *sharestatev1.SharePartitionState {
		p := &sharestatev1.SharePartitionState{}
		p.Namespace, p.Name, p.Spec.GroupID = ns, name, sharestatev1.GroupID(group)
		p.Status.StateBatches = []sharestatev1.StateBatch{"0-4/0/1"}
		return p
	}
	b := New()
	a0, a1, other := partition("ns", "a", "a-0"), partition("ns", "a", "a-1"), partition("ns2", "a", "a-0")
	for _, p := range []*sharestatev1.SharePartitionState{a0, a1, other} {
		b.Record(p)
	}
	if _, complete := b.Group("ns", "a"); complete {
		t.Fatal("the book answered before a complete pass")
	}
	if len(a0.Status.StateBatches) != 1 {
		t.Fatal("recording changed the partition it was given")
	}
	seen := map[types.NamespacedName]bool{{Namespace: "ns", Name: "a-0"}: true, {Namespace: "ns2", Name: "a-0"}: true}
	if counts := b.Passed(seen); counts.Total != 2 {
		t.Fatalf("the pass counted %d partitions, want the 2 it saw", counts.Total)
	}
	got, complete := b.Group("ns", "a")
	if !complete || len(got) != 1 || got[0].Name != "a-0" || got[0].InFlight != 5 {
		t.Fatalf("ns/a after the pass: %+v (complete %v); want a-0 alone, 5 in flight", got, complete)
	}
	got[0].Name = "changed"
	if again, _ := b.Group("ns", "a"); again[0].Name != "a-0" {
		t.Fatal("a caller's change reached the book")
	}
	if got, _ := b.Group("ns", "b"); len(got) != 0 {
		t.Fatalf("a group never seen has %d partitions", len(got))
	}
}
