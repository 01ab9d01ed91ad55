package v1alpha1_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// Every CEL rule names the field it is about: a refusal reads "status.stateEpoch: Invalid value: ...",
// never "<nil>: Invalid value" (a rule on a whole object, without a fieldPath, has no path).
func TestCELRefusalsNameTheirField(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	spsStatus := []struct {
		mutate func(*sharestatev1.SharePartitionStateStatus)
		path   string
	}{
		{func(s *sharestatev1.SharePartitionStateStatus) { s.StateEpoch = 2 }, "status.stateEpoch"},
		{func(s *sharestatev1.SharePartitionStateStatus) { s.LeaderEpoch = 4 }, "status.leaderEpoch"},
		{func(s *sharestatev1.SharePartitionStateStatus) { s.StartOffset = 99 }, "status.startOffset"},
	}
	for _, tc := range spsStatus {
		sps := initialized(t, ns)
		tc.mutate(&sps.Status)
		expectFieldRefused(t, env.Client.Status().Update(ctx, sps), tc.path)
	}
	spsSpec := []struct {
		mutate func(*sharestatev1.SharePartitionStateSpec)
		path   string
	}{
		{func(s *sharestatev1.SharePartitionStateSpec) { s.GroupID = "other" }, "spec.groupId"},
		{func(s *sharestatev1.SharePartitionStateSpec) { s.TopicID = "AAAAAAAAAAAAAAAAAAAAAQ" }, "spec.topicId"},
		{func(s *sharestatev1.SharePartitionStateSpec) { s.Partition = 1 }, "spec.partition"},
	}
	for _, tc := range spsSpec {
		sps := initialized(t, ns)
		tc.mutate(&sps.Spec)
		expectFieldRefused(t, env.Client.Update(ctx, sps), tc.path)
	}
	named := initialized(t, ns)
	named.Spec.TopicName = "orders"
	if err := env.Client.Update(ctx, named); err != nil {
		t.Fatal(err)
	}
	named.Spec.TopicName = "payments"
	expectFieldRefused(t, env.Client.Update(ctx, named), "spec.topicName")

	g := newShareGroup(ns)
	g.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: "r1", Topics: []sharestatev1.OffsetResetTopic{{TopicID: topicID, To: sharestatev1.OffsetResetToEarliest, Offset: ptr.To[int64](1)}}}
	expectFieldRefused(t, env.Client.Create(ctx, g), "spec.offsetReset.topics[0].offset")
	g.Spec.OffsetReset = nil
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Status.StateEpoch = 7
	if err := env.Client.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Status.StateEpoch = 6
	expectFieldRefused(t, env.Client.Status().Update(ctx, g), "status.stateEpoch")
}

// expectFieldRefused asserts a refusal whose text starts the field's complaint with its path.
func expectFieldRefused(t *testing.T, err error, path string) {
	t.Helper()
	expectRefused(t, err, path+": Invalid value")
	if err != nil && strings.Contains(err.Error(), "<nil>") {
		t.Errorf("error %q has a refusal without a field", err)
	}
}
