package v1alpha1

import (
	"errors"
	"math"
	"strings"
	"testing"

	"k8s.io/utils/ptr"
)

const (
	resetTopicA TopicID = "q1Sh0o2QRbuBzMz8vEMbvQ"
	resetTopicB TopicID = "AAAAAAAAAAAAAAAAAAAAAQ"
)

func resetGroup(epoch int32, topics ...ShareGroupTopic) *ShareGroup {
	return &ShareGroup{Spec: ShareGroupSpec{GroupID: "g", Topics: topics}, Status: ShareGroupStatus{StateEpoch: epoch}}
}

func partitionAt(topic TopicID, partition, epoch int32) SharePartitionState {
	return SharePartitionState{
		Spec:   SharePartitionStateSpec{GroupID: "g", TopicID: topic, Partition: partition},
		Status: SharePartitionStateStatus{StateEpoch: epoch},
	}
}

func TestResetPlan(t *testing.T) {
	declared := []ShareGroupTopic{{TopicID: resetTopicA, Name: "orders", Partitions: 3}}
	tests := []struct {
		name       string
		group      *ShareGroup
		topic      OffsetResetTopic
		partitions []SharePartitionState
		want       []ResetTarget
		wantEpoch  int64
		wantErr    string
		wantReason string
	}{{
		name:      "every declared partition, to an offset",
		group:     resetGroup(2, declared...),
		topic:     OffsetResetTopic{TopicID: resetTopicA, To: OffsetResetToOffset, Offset: ptr.To[int64](500)},
		want:      []ResetTarget{{resetTopicA, 0, 500}, {resetTopicA, 1, 500}, {resetTopicA, 2, 500}},
		wantEpoch: 3,
	}, {
		name:       "named partitions, earliest, in the request's order; the highest partition epoch wins",
		group:      resetGroup(2, declared...),
		topic:      OffsetResetTopic{TopicID: resetTopicA, To: OffsetResetToEarliest, Partitions: []int32{2, 0}},
		partitions: []SharePartitionState{partitionAt(resetTopicA, 1, 7), partitionAt(resetTopicB, 0, 5)},
		want:       []ResetTarget{{resetTopicA, 2, 0}, {resetTopicA, 0, 0}},
		wantEpoch:  8,
	}, {
		name:      "auto offset reset clears the start offset",
		group:     resetGroup(0, declared...),
		topic:     OffsetResetTopic{TopicID: resetTopicA, To: OffsetResetToAutoOffsetReset, Partitions: []int32{1}},
		want:      []ResetTarget{{resetTopicA, 1, -1}},
		wantEpoch: 1,
	}, {
		name:       "at the top of the state epoch the next one is past the int32 range",
		group:      resetGroup(0, declared...),
		topic:      OffsetResetTopic{TopicID: resetTopicA, To: OffsetResetToEarliest, Partitions: []int32{0}},
		partitions: []SharePartitionState{partitionAt(resetTopicA, 0, math.MaxInt32)},
		want:       []ResetTarget{{resetTopicA, 0, 0}},
		wantEpoch:  math.MaxInt32 + 1,
	}, {
		name:       "a group that declares nothing: every partition whose state exists, once each, in order",
		group:      resetGroup(0),
		topic:      OffsetResetTopic{TopicID: resetTopicA, To: OffsetResetToEarliest},
		partitions: []SharePartitionState{partitionAt(resetTopicA, 4, 1), partitionAt(resetTopicB, 0, 1), partitionAt(resetTopicA, 1, 2), partitionAt(resetTopicA, 4, 1)},
		want:       []ResetTarget{{resetTopicA, 1, 0}, {resetTopicA, 4, 0}},
		wantEpoch:  3,
	}, {
		name:      "a group that declares nothing: the partitions listed, with or without state",
		group:     resetGroup(0),
		topic:     OffsetResetTopic{TopicID: resetTopicB, To: OffsetResetToEarliest, Partitions: []int32{7}},
		want:      []ResetTarget{{resetTopicB, 7, 0}},
		wantEpoch: 1,
	}, {
		name:       "undeclared topic",
		group:      resetGroup(0, declared...),
		topic:      OffsetResetTopic{TopicID: resetTopicB, To: OffsetResetToEarliest},
		wantErr:    "topic AAAAAAAAAAAAAAAAAAAAAQ is not declared in spec.topics",
		wantReason: ReasonResetUndeclaredTopic,
	}, {
		name:       "partition beyond the declared count",
		group:      resetGroup(0, declared...),
		topic:      OffsetResetTopic{TopicID: resetTopicA, To: OffsetResetToEarliest, Partitions: []int32{1, 3}},
		wantErr:    "declares 3 partitions in spec.topics of group \"g\", so partition 3 does not exist",
		wantReason: ReasonResetUndeclaredPartition,
	}, {
		name:       "a group that declares nothing, and no state of the topic: how to declare it, and what that does",
		group:      resetGroup(0),
		topic:      OffsetResetTopic{TopicID: resetTopicA, To: OffsetResetToEarliest},
		partitions: []SharePartitionState{partitionAt(resetTopicB, 0, 1)},
		wantErr:    "declare the topic in spec.topics (topicId, name, partitions); once spec.topics declares a topic, every topic it does not list is UNKNOWN_TOPIC_OR_PARTITION",
		wantReason: ReasonResetNoPartitions,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			targets, err := tc.group.ResetTargets(OffsetResetRequest{ID: "r", Topics: []OffsetResetTopic{tc.topic}}, tc.partitions)
			if tc.wantErr != "" {
				var refusal *ResetRefusal
				if !errors.As(err, &refusal) || !strings.Contains(err.Error(), tc.wantErr) || refusal.Reason != tc.wantReason {
					t.Fatalf("error %v, want a %s refusal saying %q", err, tc.wantReason, tc.wantErr)
				}
				if !IsResetRefusedReason(refusal.Reason) {
					t.Errorf("IsResetRefusedReason(%s) is false", refusal.Reason)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(targets) != len(tc.want) {
				t.Fatalf("targets %+v, want %+v", targets, tc.want)
			}
			for i, got := range targets {
				if got != tc.want[i] {
					t.Errorf("target %d is %+v, want %+v", i, got, tc.want[i])
				}
			}
			if got := tc.group.NextResetStateEpoch(tc.partitions); got != tc.wantEpoch {
				t.Errorf("next state epoch %d, want %d", got, tc.wantEpoch)
			}
		})
	}
}
