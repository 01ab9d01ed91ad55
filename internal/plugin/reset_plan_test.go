package plugin

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

const (
	topicA sharestatev1.TopicID = "q1Sh0o2QRbuBzMz8vEMbvQ"
	topicB sharestatev1.TopicID = "AAAAAAAAAAAAAAAAAAAAAQ"
)

func groupDeclaring(epoch int32, topics ...sharestatev1.ShareGroupTopic) *sharestatev1.ShareGroup {
	return &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", Generation: 4},
		Spec:       sharestatev1.ShareGroupSpec{GroupID: "g", Topics: topics},
		Status:     sharestatev1.ShareGroupStatus{StateEpoch: epoch},
	}
}

func partitionAt(topic sharestatev1.TopicID, partition, epoch int32) sharestatev1.SharePartitionState {
	return sharestatev1.SharePartitionState{
		Spec:   sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: topic, Partition: partition},
		Status: sharestatev1.SharePartitionStateStatus{StateEpoch: epoch},
	}
}

func TestPlanResetRefusesAtTheTopOfTheStateEpoch(t *testing.T) {
	_, err := planReset(groupDeclaring(0, sharestatev1.ShareGroupTopic{TopicID: topicA, Partitions: 1}),
		sharestatev1.OffsetResetRequest{ID: "r", Topics: []sharestatev1.OffsetResetTopic{{TopicID: topicA, To: sharestatev1.OffsetResetToEarliest}}},
		[]sharestatev1.SharePartitionState{partitionAt(topicA, 0, sharestatev1.MaxResetStateEpoch)})
	if err == nil || !strings.Contains(err.Error(), "at most 2147483646") {
		t.Fatalf("error %v, want the reset refused at the top of the state epoch", err)
	}
}

// The state a target carries is its own partition's.
func TestPlanResetCarriesCurrentState(t *testing.T) {
	plan, err := planReset(groupDeclaring(0, sharestatev1.ShareGroupTopic{TopicID: topicA, Partitions: 2}),
		sharestatev1.OffsetResetRequest{ID: "r", Topics: []sharestatev1.OffsetResetTopic{{TopicID: topicA, To: sharestatev1.OffsetResetToEarliest}}},
		[]sharestatev1.SharePartitionState{partitionAt(topicB, 0, 9), partitionAt(topicA, 1, 3)})
	if err != nil {
		t.Fatal(err)
	}
	if plan.targets[0].current != nil || plan.targets[1].current == nil || plan.targets[1].current.Status.StateEpoch != 3 || plan.targets[1].Partition != 1 {
		t.Fatalf("targets %+v", plan.targets)
	}
	if plan.stateEpoch != 10 {
		t.Fatalf("state epoch %d: the operator chooses above every partition of the group", plan.stateEpoch)
	}
}

func TestDecideSubmit(t *testing.T) {
	earliest := []sharestatev1.OffsetResetTopic{{TopicID: topicA, To: sharestatev1.OffsetResetToEarliest, Partitions: []int32{0, 1}}}
	reordered := []sharestatev1.OffsetResetTopic{{TopicID: topicA, To: sharestatev1.OffsetResetToEarliest, Partitions: []int32{1, 0}}}
	auto := []sharestatev1.OffsetResetTopic{{TopicID: topicA, To: sharestatev1.OffsetResetToAutoOffsetReset}}
	now := metav1.NewTime(time.Now())
	tests := []struct {
		name    string
		spec    *sharestatev1.OffsetResetRequest
		last    *sharestatev1.OffsetResetStatus
		refused bool
		want    submitAction
		wantErr string
	}{
		{name: "no request yet", want: submitWrite},
		{name: "the same request, not started", spec: &sharestatev1.OffsetResetRequest{ID: "r1", Topics: reordered}, want: submitPending},
		{name: "the same request, done", spec: &sharestatev1.OffsetResetRequest{ID: "r1", Topics: earliest},
			last: &sharestatev1.OffsetResetStatus{ID: "r1", StartTime: &now, CompletionTime: &now}, want: submitDone},
		{name: "the same id with other topics", spec: &sharestatev1.OffsetResetRequest{ID: "r1", Topics: auto}, wantErr: `reset "r1" was already requested with other topics`},
		{name: "done earlier, another request since", spec: &sharestatev1.OffsetResetRequest{ID: "r0", Topics: auto},
			last: &sharestatev1.OffsetResetStatus{ID: "r1", CompletionTime: &now}, want: submitDone},
		{name: "another request in progress", spec: &sharestatev1.OffsetResetRequest{ID: "r0", Topics: auto},
			last: &sharestatev1.OffsetResetStatus{ID: "r0", StartTime: &now}, wantErr: `reset "r0" is in progress`},
		{name: "another request done", spec: &sharestatev1.OffsetResetRequest{ID: "r0", Topics: auto},
			last: &sharestatev1.OffsetResetStatus{ID: "r0", StartTime: &now, CompletionTime: &now}, want: submitWrite},
		{name: "another request refused", spec: &sharestatev1.OffsetResetRequest{ID: "r0", Topics: auto}, refused: true, want: submitWrite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sg := groupDeclaring(0)
			sg.Spec.OffsetReset, sg.Status.LastOffsetReset = tc.spec, tc.last
			if tc.refused {
				sg.Status.Conditions = []metav1.Condition{{Type: sharestatev1.ConditionOffsetReset, Status: metav1.ConditionFalse,
					Reason: sharestatev1.ReasonResetUndeclaredTopic, ObservedGeneration: sg.Generation}}
			}
			got, err := decideSubmit(sg, sharestatev1.OffsetResetRequest{ID: "r1", Topics: earliest})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("decideSubmit = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestResetOutcome(t *testing.T) {
	now := metav1.NewTime(time.Now())
	refusedAt := func(generation int64) []metav1.Condition {
		return []metav1.Condition{{Type: sharestatev1.ConditionOffsetReset, Status: metav1.ConditionFalse, Reason: sharestatev1.ReasonResetUndeclaredTopic,
			Message: sharestatev1.ResetRefusalMessage("r1", "topic X is not declared"), ObservedGeneration: generation}}
	}
	tests := []struct {
		name       string
		specID     string
		last       *sharestatev1.OffsetResetStatus
		conditions []metav1.Condition
		wantDone   bool
		wantErr    string
	}{
		{name: "not started", specID: "r1"},
		{name: "started", specID: "r1", last: &sharestatev1.OffsetResetStatus{ID: "r1", StartTime: &now}},
		{name: "completed", specID: "r1", last: &sharestatev1.OffsetResetStatus{ID: "r1", StartTime: &now, CompletionTime: &now}, wantDone: true},
		{name: "an older reset completed", specID: "r1", last: &sharestatev1.OffsetResetStatus{ID: "r0", CompletionTime: &now}},
		{name: "refused", specID: "r1", conditions: refusedAt(4), wantErr: `the operator refused reset "r1" (ResetUndeclaredTopic): topic X is not declared`},
		{name: "refused for another reason", specID: "r1", conditions: []metav1.Condition{{Type: sharestatev1.ConditionOffsetReset, Status: metav1.ConditionFalse,
			Reason: sharestatev1.ReasonStateEpochExhausted, Message: sharestatev1.ResetRefusalMessage("r1", "the state epoch cannot be raised any further"), ObservedGeneration: 4}},
			wantErr: `the operator refused reset "r1" (StateEpochExhausted): the state epoch cannot`},
		{name: "in progress is no refusal", specID: "r1", conditions: []metav1.Condition{{Type: sharestatev1.ConditionOffsetReset, Status: metav1.ConditionFalse,
			Reason: sharestatev1.ReasonResetInProgress, ObservedGeneration: 4}}},
		{name: "an older request refused", specID: "r1", conditions: refusedAt(3)},
		{name: "replaced", specID: "r2", wantErr: `reset "r1" was replaced while waiting`},
		{name: "completed, then replaced", specID: "r2", last: &sharestatev1.OffsetResetStatus{ID: "r1", CompletionTime: &now}, wantDone: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sg := groupDeclaring(0)
			sg.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: tc.specID}
			sg.Status.LastOffsetReset, sg.Status.Conditions = tc.last, tc.conditions
			done, err := resetOutcome(sg, "r1", 4)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || done != tc.wantDone {
				t.Fatalf("resetOutcome = %v, %v; want %v", done, err, tc.wantDone)
			}
		})
	}
}
