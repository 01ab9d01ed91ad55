package controllers

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/controllers/partitionbook"
)

// groupLister is a cache reader that answers List of ShareGroups with none, records whether each List
// asked for the cache's own objects (client.UnsafeDisableDeepCopy), and fails a List of anything else.
type groupLister struct {
	client.Reader
	copied []bool
	others int
}

func (r *groupLister) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*sharestatev1.ShareGroupList); !ok {
		r.others++
		return nil
	}
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	r.copied = append(r.copied, o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy)
	return nil
}

// TestCollectorReportsTheLastResync: a scrape reports the partitions counted by the last resync pass
// (none before the first) and lists nothing but the cached groups, without copying them.
func TestCollectorReportsTheLastResync(t *testing.T) {
	groups := &groupLister{}
	r := &SharePartitionStateReconciler{}
	reg := prometheus.NewRegistry()
	reg.MustRegister(&PartitionsCollector{groups: groups, partitions: r})
	if n, err := testutil.GatherAndCount(reg, "sharestate_partitions"); err != nil || n != 0 {
		t.Fatalf("gathered %d partition series before a resync (%v), want none", n, err)
	}

	var counts partitionbook.Counts
	now := metav1.Now()
	fenced := sharestatev1.SharePartitionState{}
	fenced.Status.CreateTime = &now
	fenced.Status.Conditions = []metav1.Condition{{Type: sharestatev1.ConditionFenced, Status: metav1.ConditionTrue, Reason: sharestatev1.ReasonLeaderPodDeleted}}
	led := sharestatev1.SharePartitionState{}
	led.Status.CreateTime = &now
	led.Status.Leader = &sharestatev1.LeaderRef{PodName: "kafka-0"}
	for _, p := range []*sharestatev1.SharePartitionState{&fenced, &led, {}} {
		counts.Add(partitionbook.SummaryOf(p))
	}
	r.counts.set(counts)
	want := `
# HELP sharestate_partitions SharePartitionStates by condition: initialized, fenced, with_leader, and all of them (total), as of the last resync pass over every partition (--partition-resync-period).
# TYPE sharestate_partitions gauge
sharestate_partitions{state="fenced"} 1
sharestate_partitions{state="initialized"} 2
sharestate_partitions{state="total"} 3
sharestate_partitions{state="with_leader"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sharestate_partitions"); err != nil {
		t.Fatal(err)
	}
	if groups.others != 0 || len(groups.copied) != 2 || groups.copied[0] || groups.copied[1] {
		t.Fatalf("scrapes listed %d other kinds and %v groups with copies; want none, and two lists without", groups.others, groups.copied)
	}
}
