package v1alpha1_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() { env = e; return nil }))
}

const topicID = "q1Sh0o2QRbuBzMz8vEMbvQ"

func newSPS(ns string) *sharestatev1.SharePartitionState {
	return &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.SharePartitionStateName("orders", topicID, 0)},
		Spec:       sharestatev1.SharePartitionStateSpec{GroupID: "orders", TopicID: topicID, Partition: 0},
	}
}

// expectRefused asserts that err is the API server's Invalid error and that its text names every
// fragment (a field path, a message).
func expectRefused(t *testing.T, err error, fragments ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted, want refused with %q", fragments)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("got %v, want an Invalid error", err)
	}
	for _, f := range fragments {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not mention %q", err, f)
		}
	}
}

func TestSharePartitionStateSpecValidation(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	tests := []struct {
		name   string
		mutate func(*sharestatev1.SharePartitionState)
		refuse []string // empty: accepted
	}{
		{"valid", func(*sharestatev1.SharePartitionState) {}, nil},
		{"valid with topic name", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicName = "orders.v2_EU-1" }, nil},
		{"negative partition", func(s *sharestatev1.SharePartitionState) { s.Spec.Partition = -1 }, []string{"spec.partition", "greater than or equal to 0"}},
		{"topicId too short", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicID = "q1Sh0o2QRbuBzMz8vEMbv" }, []string{"spec.topicId", "should match"}},
		{"topicId with padding", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicID = "q1Sh0o2QRbuBzMz8vEMb==" }, []string{"spec.topicId"}},
		{"topicId not url-safe", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicID = "q1Sh0o2QRbu+zMz8vEMbvQ" }, []string{"spec.topicId"}},
		{"topicId last char impossible", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicID = "q1Sh0o2QRbuBzMz8vEMbvB" }, []string{"spec.topicId"}},
		{"topicId zero uuid", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicID = "AAAAAAAAAAAAAAAAAAAAAA" }, []string{"spec.topicId", "zero Uuid"}},
		{"empty groupId", func(s *sharestatev1.SharePartitionState) { s.Spec.GroupID = "" }, []string{"spec.groupId"}},
		{"groupId over 255", func(s *sharestatev1.SharePartitionState) {
			s.Spec.GroupID = sharestatev1.GroupID(strings.Repeat("g", 256))
		}, []string{"spec.groupId", "255"}},
		{"bad topic name", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicName = "no spaces" }, []string{"spec.topicName"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sps := newSPS(ns)
			sps.Name = sps.Name + "-" + string(rune('a'+i))
			tt.mutate(sps)
			err := env.Client.Create(ctx, sps)
			if len(tt.refuse) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			expectRefused(t, err, tt.refuse...)
		})
	}
}

func TestSharePartitionStateSpecIsImmutable(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	tests := []struct {
		name   string
		mutate func(*sharestatev1.SharePartitionState)
		refuse []string
	}{
		{"groupId", func(s *sharestatev1.SharePartitionState) { s.Spec.GroupID = "other" }, []string{"immutable"}},
		{"topicId", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicID = "AAAAAAAAAAAAAAAAAAAAAQ" }, []string{"immutable"}},
		{"partition", func(s *sharestatev1.SharePartitionState) { s.Spec.Partition = 1 }, []string{"immutable"}},
		{"topicName set when unset", func(s *sharestatev1.SharePartitionState) { s.Spec.TopicName = "orders" }, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sps := newSPS(ns)
			sps.GenerateName, sps.Name = "sps-", ""
			if err := env.Client.Create(ctx, sps); err != nil {
				t.Fatal(err)
			}
			tt.mutate(sps)
			err := env.Client.Update(ctx, sps)
			if len(tt.refuse) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				// Once set, the topic name is fixed too.
				sps.Spec.TopicName = "renamed"
				expectRefused(t, env.Client.Update(ctx, sps), "topicName is immutable once set")
				return
			}
			expectRefused(t, err, tt.refuse...)
		})
	}
}

// initialized creates an object and writes a first status: state epoch 3, leader epoch 5, start offset 100,
// initialized once.
func initialized(t *testing.T, ns string) *sharestatev1.SharePartitionState {
	t.Helper()
	ctx := context.Background()
	sps := newSPS(ns)
	sps.GenerateName, sps.Name = "sps-", ""
	if err := env.Client.Create(ctx, sps); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	sps.Status = sharestatev1.SharePartitionStateStatus{
		StateEpoch: 3, LeaderEpoch: 5, StartOffset: 100, DeliveryCompleteCount: 0, InitializeCount: 1,
		StateBatches: []sharestatev1.StateBatch{"100-109/2/1", "110/0/2"},
		CreateTime:   &now, WriteTime: &now,
	}
	if err := env.Client.Status().Update(ctx, sps); err != nil {
		t.Fatalf("first status write refused: %v", err)
	}
	return sps
}

func TestSharePartitionStateStatusValidation(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	tests := []struct {
		name   string
		mutate func(*sharestatev1.SharePartitionStateStatus)
		refuse []string
	}{
		{"raise epochs and start offset", func(s *sharestatev1.SharePartitionStateStatus) {
			s.StateEpoch, s.LeaderEpoch, s.StartOffset = 4, 6, 105
		}, nil},
		{"reset lowers start offset with a higher state epoch", func(s *sharestatev1.SharePartitionStateStatus) {
			s.StateEpoch, s.StartOffset, s.StateBatches = 4, 0, nil
		}, nil},
		{"reset to unset start offset", func(s *sharestatev1.SharePartitionStateStatus) { s.StateEpoch, s.StartOffset = 4, -1 }, nil},
		// Kafka's coordinator re-initializes at an equal state epoch (semantics §5): the raised
		// initializeCount sanctions the lower start offset.
		{"reset lowers start offset at an equal state epoch with a higher initializeCount", func(s *sharestatev1.SharePartitionStateStatus) {
			s.InitializeCount, s.StartOffset, s.StateBatches = 2, 0, nil
		}, nil},
		{"reset to unset start offset at an equal state epoch", func(s *sharestatev1.SharePartitionStateStatus) {
			s.InitializeCount, s.StartOffset = 2, -1
		}, nil},
		{"lowered initializeCount", func(s *sharestatev1.SharePartitionStateStatus) { s.InitializeCount = 0 }, []string{"status.initializeCount may not be lowered"}},
		{"lowered initializeCount cannot sanction a lower start offset", func(s *sharestatev1.SharePartitionStateStatus) {
			s.InitializeCount, s.StartOffset = 0, 99
		}, []string{"status.initializeCount may not be lowered", "status.startOffset of an initialized state may be lowered only by a reset"}},
		{"lowered state epoch", func(s *sharestatev1.SharePartitionStateStatus) { s.StateEpoch = 2 }, []string{"status.stateEpoch may not be lowered"}},
		{"lowered leader epoch", func(s *sharestatev1.SharePartitionStateStatus) { s.LeaderEpoch = 4 }, []string{"status.leaderEpoch may not be lowered"}},
		// semantics §5: a reset keeps the leader-epoch fence.
		{"a reset does not lower the leader epoch", func(s *sharestatev1.SharePartitionStateStatus) { s.StateEpoch, s.LeaderEpoch = 4, 0 }, []string{"status.leaderEpoch may not be lowered"}},
		{"lowered start offset without a reset", func(s *sharestatev1.SharePartitionStateStatus) { s.StartOffset = 99 }, []string{"status.startOffset of an initialized state may be lowered only by a reset"}},
		{"start offset below -1", func(s *sharestatev1.SharePartitionStateStatus) { s.StateEpoch, s.StartOffset = 4, -2 }, []string{"status.startOffset"}},
		{"delivery complete count below -1", func(s *sharestatev1.SharePartitionStateStatus) { s.DeliveryCompleteCount = -2 }, []string{"status.deliveryCompleteCount"}},
		// The batch's shape; its grammar is the codec's (TestStateBatchSchemaBoundsTheShape).
		{"malformed batch: text", func(s *sharestatev1.SharePartitionStateStatus) { s.StateBatches = []sharestatev1.StateBatch{"abc"} }, []string{"status.stateBatches[0]", "should match"}},
		{"malformed batch: negative offset", func(s *sharestatev1.SharePartitionStateStatus) { s.StateBatches = []sharestatev1.StateBatch{"-5/0/1"} }, []string{"status.stateBatches[0]"}},
		{"largest valid batch", func(s *sharestatev1.SharePartitionStateStatus) {
			s.StateBatches = []sharestatev1.StateBatch{"9223372036854775806-9223372036854775807/4/32767"}
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sps := initialized(t, ns)
			tt.mutate(&sps.Status)
			err := env.Client.Status().Update(ctx, sps)
			if len(tt.refuse) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			expectRefused(t, err, tt.refuse...)
		})
	}
}

// Before the persister's first status write (createTime unset), the zeros a status carries are not a
// start offset: the first Initialize may store -1 at state epoch 0, whoever wrote the status first.
func TestUninitializedStatusHasNoStartOffset(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	sps := newSPS(env.Namespace(t))
	sps.GenerateName, sps.Name = "sps-", ""
	if err := env.Client.Create(ctx, sps); err != nil {
		t.Fatal(err)
	}
	sps.Status = sharestatev1.SharePartitionStateStatus{StartOffset: 0} // as an operator's report used to store it
	if err := env.Client.Status().Update(ctx, sps); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	sps.Status = sharestatev1.SharePartitionStateStatus{StartOffset: -1, DeliveryCompleteCount: -1, CreateTime: &now, WriteTime: &now}
	if err := env.Client.Status().Update(ctx, sps); err != nil {
		t.Fatalf("the first Initialize at -1 was refused: %v", err)
	}
	sps.Status.StartOffset = 5
	if err := env.Client.Status().Update(ctx, sps); err != nil {
		t.Fatal(err)
	}
	sps.Status.StartOffset = 4
	expectRefused(t, env.Client.Status().Update(ctx, sps), "status.startOffset of an initialized state")
}

// A client that drops the epoch fields altogether (a merge patch that deletes them) must not get
// around the transition rules.
func TestSharePartitionStateStatusFieldsCannotBeRemoved(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	sps := initialized(t, env.Namespace(t))
	for _, field := range []string{"stateEpoch", "leaderEpoch", "startOffset"} {
		patch := []byte(`{"status":{"` + field + `":null}}`)
		err := env.Client.Status().Patch(ctx, sps, client.RawPatch("application/merge-patch+json", patch))
		expectRefused(t, err, "status."+field)
	}
	// Nor around them by deleting the whole status (a status update without one does that too).
	err := env.Client.Status().Patch(ctx, sps, client.RawPatch("application/merge-patch+json", []byte(`{"status":null}`)))
	expectRefused(t, err, "status may not be removed")

	g := newShareGroup(env.Namespace(t))
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Status.StateEpoch = 3
	if err := env.Client.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	for patch, refusal := range map[string]string{
		`{"status":{"stateEpoch":null}}`: "status.stateEpoch may not be lowered", // the default, 0
		`{"status":null}`:                "status may not be removed",
	} {
		err := env.Client.Status().Patch(ctx, g, client.RawPatch("application/merge-patch+json", []byte(patch)))
		expectRefused(t, err, refusal)
	}
	got := &sharestatev1.ShareGroup{}
	testenv.Get(t, env.Client, client.ObjectKeyFromObject(g), got)
	if got.Status.StateEpoch != 3 {
		t.Errorf("group stateEpoch %d after the refused patches, want 3", got.Status.StateEpoch)
	}
}

func TestSharePartitionStateStatusIsASubresource(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	sps := initialized(t, env.Namespace(t))

	// An update of the object ignores status...
	changed := sps.DeepCopy()
	changed.Status.StateEpoch = 9
	changed.Labels = map[string]string{"touched": "yes"}
	if err := env.Client.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	var got sharestatev1.SharePartitionState
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sps), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.StateEpoch != 3 || got.Labels["touched"] != "yes" {
		t.Fatalf("object update: stateEpoch %d (want 3, untouched), labels %v", got.Status.StateEpoch, got.Labels)
	}

	// ...and an update of status ignores the rest of the object.
	got.Status.StateEpoch = 4
	got.Labels = nil
	if err := env.Client.Status().Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	var after sharestatev1.SharePartitionState
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sps), &after); err != nil {
		t.Fatal(err)
	}
	if after.Status.StateEpoch != 4 || after.Labels["touched"] != "yes" {
		t.Fatalf("status update: stateEpoch %d (want 4), labels %v (want kept)", after.Status.StateEpoch, after.Labels)
	}
}

func newShareGroup(ns string) *sharestatev1.ShareGroup {
	return &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "sg-"},
		Spec: sharestatev1.ShareGroupSpec{
			GroupID: "orders",
			Topics:  []sharestatev1.ShareGroupTopic{{TopicID: topicID, Name: "orders", Partitions: 12}},
			Settings: &sharestatev1.ShareGroupSettings{
				DeliveryCountLimit: ptr.To[int32](5), RecordLockDurationMs: ptr.To[int32](30000),
				MaxRecordLocks: ptr.To[int32](2000), AutoOffsetReset: sharestatev1.AutoOffsetResetEarliest,
			},
		},
	}
}

func TestShareGroupValidation(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	tests := []struct {
		name   string
		mutate func(*sharestatev1.ShareGroup)
		refuse []string
	}{
		{"valid", func(*sharestatev1.ShareGroup) {}, nil},
		{"valid reset to offset", func(g *sharestatev1.ShareGroup) {
			g.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: "r1", Topics: []sharestatev1.OffsetResetTopic{{TopicID: topicID, To: sharestatev1.OffsetResetToOffset, Offset: ptr.To[int64](42)}}}
		}, nil},
		{"valid by_duration", func(g *sharestatev1.ShareGroup) { g.Spec.Settings.AutoOffsetReset = "by_duration:PT1H" }, nil},
		{"delivery count limit too low", func(g *sharestatev1.ShareGroup) { g.Spec.Settings.DeliveryCountLimit = ptr.To[int32](1) }, []string{"spec.settings.deliveryCountLimit"}},
		{"delivery count limit too high", func(g *sharestatev1.ShareGroup) { g.Spec.Settings.DeliveryCountLimit = ptr.To[int32](11) }, []string{"spec.settings.deliveryCountLimit"}},
		{"unknown auto offset reset", func(g *sharestatev1.ShareGroup) { g.Spec.Settings.AutoOffsetReset = "smallest" }, []string{"spec.settings.autoOffsetReset"}},
		{"zero partitions", func(g *sharestatev1.ShareGroup) { g.Spec.Topics[0].Partitions = 0 }, []string{"spec.topics[0].partitions"}},
		{"reset to offset without offset", func(g *sharestatev1.ShareGroup) {
			g.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: "r1", Topics: []sharestatev1.OffsetResetTopic{{TopicID: topicID, To: sharestatev1.OffsetResetToOffset}}}
		}, []string{"offset is required with to: Offset"}},
		{"reset to earliest with an offset", func(g *sharestatev1.ShareGroup) {
			g.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: "r1", Topics: []sharestatev1.OffsetResetTopic{{TopicID: topicID, To: sharestatev1.OffsetResetToEarliest, Offset: ptr.To[int64](1)}}}
		}, []string{"offset is required with to: Offset and not allowed otherwise"}},
		{"reset without topics", func(g *sharestatev1.ShareGroup) { g.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: "r1"} }, []string{"spec.offsetReset.topics"}},
		{"reset with a bad id", func(g *sharestatev1.ShareGroup) {
			g.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: "-bad", Topics: []sharestatev1.OffsetResetTopic{{TopicID: topicID, To: sharestatev1.OffsetResetToEarliest}}}
		}, []string{"spec.offsetReset.id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newShareGroup(ns)
			tt.mutate(g)
			err := env.Client.Create(ctx, g)
			if len(tt.refuse) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			expectRefused(t, err, tt.refuse...)
		})
	}
}

func TestShareGroupTransitions(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	g := newShareGroup(env.Namespace(t))
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	renamed := g.DeepCopy()
	renamed.Spec.GroupID = "payments"
	expectRefused(t, env.Client.Update(ctx, renamed), "groupId is immutable")

	g.Status.StateEpoch = 7
	if err := env.Client.Status().Update(ctx, g); err != nil {
		t.Fatal(err)
	}
	g.Status.StateEpoch = 6
	expectRefused(t, env.Client.Status().Update(ctx, g), "status.stateEpoch may not be lowered")
}

// The worst case of Kafka's default in-flight window: 2000 single-offset batches that do not coalesce
// (alternating states), at offsets near 10^12. The API server must accept it, and the stored JSON of
// the batches must stay within 24 bytes a batch.
func TestStoredSizeWorstCase(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	sps := initialized(t, env.Namespace(t))
	const batches, base = 2000, int64(1_000_000_000_000)
	sps.Status.StartOffset = base
	sps.Status.StateBatches = worstCaseBatches(batches, base)
	if err := env.Client.Status().Update(ctx, sps); err != nil {
		t.Fatalf("the API server refused the worst case: %v", err)
	}

	// Measure what the API server stores and serves, not what we sent.
	rc, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := rc.RESTClient().Get().
		AbsPath("/apis/sharestate.dev/v1alpha1/namespaces", sps.Namespace, "sharepartitionstates", sps.Name).
		DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var served struct {
		Status struct {
			StateBatches json.RawMessage `json:"stateBatches"`
		} `json:"status"`
	}
	if err := json.Unmarshal(body, &served); err != nil {
		t.Fatal(err)
	}
	perBatch := float64(len(served.Status.StateBatches)) / batches
	t.Logf("worst case: %d batches take %d bytes of JSON, %.1f bytes a batch; the whole object %d bytes",
		batches, len(served.Status.StateBatches), perBatch, len(body))
	if perBatch > 24 {
		t.Errorf("%.1f bytes a batch, want at most 24", perBatch)
	}
	var stored sharestatev1.SharePartitionState
	if err := json.Unmarshal(body, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored.Status.StateBatches) != batches || stored.Status.StateBatches[batches-1] != sps.Status.StateBatches[batches-1] {
		t.Errorf("the stored batches differ from the written ones")
	}
}

func worstCaseBatches(n int, base int64) []sharestatev1.StateBatch {
	out := make([]sharestatev1.StateBatch, n)
	for i := range out {
		state := "0"
		if i%2 == 1 {
			state = "2"
		}
		out[i] = sharestatev1.StateBatch(strings.Join([]string{itoa(base + int64(i)), state, "1"}, "/"))
	}
	return out
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// Once its managedFields are reset (a write of the object, not its status, setting them to one empty
// entry), the API server tracks no field ownership of a SharePartitionState until someone applies it
// server-side: it skips the field management of an update whose object has none
// (k8s.io/apimachinery v0.37.2, pkg/util/managedfields/internal/skipnonapplied.go). The persister
// strips every object it creates (pkg/sharestate/persister) and relies on this; the test fails if a
// Kubernetes release changes it.
func TestStrippedManagedFieldsStayAway(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	sps := newSPS(env.Namespace(t))
	sps.Labels = map[string]string{"app": "test"}
	if err := env.Client.Create(ctx, sps, client.FieldOwner("creator")); err != nil {
		t.Fatal(err)
	}
	if len(sps.ManagedFields) == 0 {
		t.Fatal("a create left no managedFields: nothing to strip")
	}
	strip := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"managedFields":[{}]}}`))
	if err := env.Client.Patch(ctx, sps, strip, client.FieldOwner("creator")); err != nil {
		t.Fatal(err)
	}
	expectNoManagedFields(t, sps, "the strip")

	now := metav1.Now()
	sps.Status = sharestatev1.SharePartitionStateStatus{
		StateEpoch: 1, LeaderEpoch: 2, StartOffset: 10, StateBatches: []sharestatev1.StateBatch{"10-19/2/1"},
		Leader: &sharestatev1.LeaderRef{BrokerID: 1, PodName: "broker-1"}, CreateTime: &now, WriteTime: &now,
	}
	if err := env.Client.Status().Update(ctx, sps, client.FieldOwner("persister")); err != nil {
		t.Fatal(err)
	}
	expectNoManagedFields(t, sps, "a status update")

	observed := sps.DeepCopy()
	observed.Status.ObservedGeneration = 1
	observed.Status.Conditions = []metav1.Condition{{Type: "Initialized", Status: metav1.ConditionTrue, Reason: "StateInitialized", LastTransitionTime: now}}
	patch := client.MergeFromWithOptions(sps, client.MergeFromWithOptimisticLock{})
	if err := env.Client.Status().Patch(ctx, observed, patch, client.FieldOwner("operator")); err != nil {
		t.Fatal(err)
	}
	expectNoManagedFields(t, observed, "a status patch")

	observed.Labels["more"] = "yes"
	if err := env.Client.Update(ctx, observed, client.FieldOwner("admin")); err != nil {
		t.Fatal(err)
	}
	expectNoManagedFields(t, observed, "an update of the object")
}

func expectNoManagedFields(t *testing.T, obj *sharestatev1.SharePartitionState, after string) {
	t.Helper()
	var got sharestatev1.SharePartitionState
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.ManagedFields) != 0 {
		t.Fatalf("after %s the object has managedFields %+v", after, got.ManagedFields)
	}
}
