package controllers

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

const testTopic = v1.TopicID("q1Sh0o2QRbuBzMz8vEMbvQ")

func TestResetTargets(t *testing.T) {
	sg := &v1.ShareGroup{Spec: v1.ShareGroupSpec{Topics: []v1.ShareGroupTopic{{TopicID: testTopic, Partitions: 3}}}}
	tests := []struct {
		name   string
		topics []v1.OffsetResetTopic
		starts []int64 // per target, in order
		refuse string
	}{
		{"every declared partition", []v1.OffsetResetTopic{{TopicID: testTopic, To: v1.OffsetResetToOffset, Offset: ptr.To[int64](42)}}, []int64{42, 42, 42}, ""},
		{"named partitions, earliest", []v1.OffsetResetTopic{{TopicID: testTopic, To: v1.OffsetResetToEarliest, Partitions: []int32{2, 0}}}, []int64{0, 0}, ""},
		{"auto offset reset", []v1.OffsetResetTopic{{TopicID: testTopic, To: v1.OffsetResetToAutoOffsetReset, Partitions: []int32{1}}}, []int64{-1}, ""},
		{"undeclared topic", []v1.OffsetResetTopic{{TopicID: "AAAAAAAAAAAAAAAAAAAAAQ", To: v1.OffsetResetToEarliest}}, nil, "not declared"},
		{"partition past the count", []v1.OffsetResetTopic{{TopicID: testTopic, To: v1.OffsetResetToEarliest, Partitions: []int32{3}}}, nil, "not partition 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := sg.DeepCopy()
			g.Spec.OffsetReset = &v1.OffsetResetRequest{ID: "r", Topics: tt.topics}
			targets, err := resetTargets(g)
			if tt.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refuse) {
					t.Fatalf("error %v, want one mentioning %q", err, tt.refuse)
				}
				return
			}
			if err != nil || len(targets) != len(tt.starts) {
				t.Fatalf("targets %+v, error %v", targets, err)
			}
			for i, target := range targets {
				if target.startOffset != tt.starts[i] {
					t.Errorf("target %d starts at %d, want %d", i, target.startOffset, tt.starts[i])
				}
			}
		})
	}
}

func TestAggregate(t *testing.T) {
	now := metav1.Now()
	sg := &v1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
	led := v1.SharePartitionState{Status: v1.SharePartitionStateStatus{StateEpoch: 2, CreateTime: &now, DeliveryCompleteCount: 4,
		Leader: &v1.LeaderRef{PodName: "kafka-0"}, StateBatches: []v1.StateBatch{"10-14/0/1", "15/2/1", "16-17/3/1"}}}
	fenced := v1.SharePartitionState{Status: v1.SharePartitionStateStatus{StateEpoch: 5, CreateTime: &now, DeliveryCompleteCount: -1,
		Conditions: []metav1.Condition{{Type: v1.ConditionFenced, Status: metav1.ConditionTrue, Reason: v1.ReasonLeaderPodDeleted}}}}
	uninitialized := v1.SharePartitionState{}
	s := aggregate(sg, []v1.SharePartitionState{led, fenced, uninitialized}, v1.ShareGroupStatus{})
	if s.Partitions != 3 || s.InitializedPartitions != 2 || s.FencedPartitions != 1 || s.PartitionsWithLeader != 1 ||
		s.StateEpoch != 5 || s.InFlightRecords != 7 || s.DeliveryCompleteRecords != 4 || s.ObservedGeneration != 3 {
		t.Fatalf("status %+v", s)
	}
	if c := meta.FindStatusCondition(s.Conditions, v1.ConditionReady); c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonPartitionsFenced {
		t.Fatalf("Ready %+v", c)
	}
	ready := aggregate(sg, []v1.SharePartitionState{led}, s)
	if c := meta.FindStatusCondition(ready.Conditions, v1.ConditionReady); c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready %+v", c)
	}
	if c := meta.FindStatusCondition(ready.Conditions, v1.ConditionFenced); c.Status != metav1.ConditionFalse {
		t.Fatalf("Fenced %+v", c)
	}
}
