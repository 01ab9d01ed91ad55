package plugin_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/plugin"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// reset-offsets end to end: a dry run changes nothing; the operator carries the reset out and the
// command reports it; the same --id again is the same reset; a second request by group id, for some
// partitions, runs at the next state epoch.
func TestResetOffsets(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	const group = "reset-orders"
	sg := declareGroup(t, ns, group, 3)
	b := newBroker(t, ns, group, 1, brokerPod(t, ns, "broker-1"))
	for part := range int32(3) {
		b.initialize(part, 0, 0)
		b.read(part, 1)
		b.mustWrite(part, 0, 1, 2, batch(10, 11, sharestate.DeliveryStateAcknowledged, 1))
	}

	before := getGroup(t, sg)
	out := mustRun(t, "reset-offsets", sg.Name, "-n", ns, "--topic", "orders", "--to-offset", "500", "--id", "r1", "--dry-run")
	lineMatching(t, out, `^Dry run: nothing was changed\.`)
	lineMatching(t, out, `^\s+id: r1$`)
	lineMatching(t, out, `^\s+(- )?offset: 500$`)
	lineMatching(t, out, `^The operator would initialize 3 partitions at state epoch 1 `)
	lineMatching(t, out, `^\s+orders \(`+topicOrders+`\)\s+2\s+0\s+0\s+500\s+1/broker-1$`)
	if after := getGroup(t, sg); after.Generation != before.Generation || after.Spec.OffsetReset != nil {
		t.Fatalf("the dry run changed the group: generation %d → %d, offsetReset %+v", before.Generation, after.Generation, after.Spec.OffsetReset)
	}

	args := []string{"reset-offsets", sg.Name, "-n", ns, "--topic", topicOrders, "--to-offset", "500", "--id", "r1", "--timeout", "30s", "--execute"}
	out = mustRun(t, args...)
	lineMatching(t, out, `^Reset "r1" is in spec\.offsetReset; waiting up to 30s for the operator\.$`)
	lineMatching(t, out, `^Offset reset "r1" of group "reset-orders" \(ShareGroup `+ns+`/`+sg.Name+`\) completed: 3 partitions initialized at state epoch 1\.$`)
	lineMatching(t, out, `^orders \(`+topicOrders+`\)\s+1\s+1\s+500$`)
	for part := range int32(3) {
		s := getPartition(t, ns, group, part).Status
		if s.StateEpoch != 1 || s.StartOffset != 500 || len(s.StateBatches) != 0 {
			t.Fatalf("partition %d after the reset: state epoch %d, start offset %d, batches %v", part, s.StateEpoch, s.StartOffset, s.StateBatches)
		}
		if code := b.write(part, 0, 1, -1, batch(12, 12, sharestate.DeliveryStateAcknowledged, 1)); code != sharestate.ErrFencedStateEpoch {
			t.Fatalf("the old leader's write to partition %d after the reset was answered %s", part, code)
		}
	}
	// Progress at the reset's epoch, which running the same request again must keep.
	if r := b.read(0, 1); r.StateEpoch != 1 || r.StartOffset != 500 {
		t.Fatalf("reload after the reset: %+v", r)
	}
	b.mustWrite(0, 1, 1, 1, batch(500, 500, sharestate.DeliveryStateAcknowledged, 1))
	out = mustRun(t, args...)
	lineMatching(t, out, `^Offset reset "r1" .* was already carried out: 3 partitions initialized at state epoch 1\.$`)
	if s := getPartition(t, ns, group, 0).Status; s.StateEpoch != 1 || !slices.Equal(batchStrings(s.StateBatches), []string{"500/2/1"}) {
		t.Fatalf("the same request ran twice: partition 0 at state epoch %d with batches %v", s.StateEpoch, s.StateBatches)
	}

	// The same id with other topics is a mistake the command refuses, dry run or not.
	for _, dry := range []string{"--dry-run", "--execute"} {
		mustFail(t, "", `reset "r1" was already requested with other topics`, "reset-offsets", sg.Name, "-n", ns,
			"--topic", "orders", "--to-auto", "--id", "r1", dry)
	}

	// By group id, to the earliest offset, for partitions 0 and 2, with an id chosen by the command.
	out = mustRun(t, "reset-offsets", group, "-n", ns, "--topic", "orders", "--to-earliest", "--partitions", "2,0", "--timeout", "30s", "--execute")
	lineMatching(t, out, `^Offset reset "reset-\d{8}-\d{6}-[0-9a-f]{8}" of group "reset-orders" .* completed: 2 partitions initialized at state epoch 2\.$`)
	for part, want := range map[int32][2]int64{0: {2, 0}, 1: {1, 500}, 2: {2, 0}} {
		if s := getPartition(t, ns, group, part).Status; int64(s.StateEpoch) != want[0] || s.StartOffset != want[1] {
			t.Fatalf("partition %d after the second reset: state epoch %d, start offset %d; want %v", part, s.StateEpoch, s.StartOffset, want)
		}
	}
	if id := getGroup(t, sg).Status.LastOffsetReset.ID; !strings.HasPrefix(id, "reset-") || id == "r1" {
		t.Fatalf("last reset %q, want the generated id", id)
	}
}

// A reset the operator would refuse (a topic or a partition the group does not declare) is refused by
// the command before anything is written, dry run or not, saying "refuse" once. Before, the command
// wrote the request, which then stayed in the spec, refused. Bad input fails before anything is
// written.
func TestResetOffsetsRefused(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	sg := declareGroup(t, ns, "reset-plan", 2)
	generation := getGroup(t, sg).Generation

	for _, tc := range []struct {
		want string
		args []string
	}{
		{"so nothing was written: topic " + topicUndeclared + " is not declared in spec.topics", []string{"--topic", topicUndeclared, "--to-earliest"}},
		{"so nothing was written: topic " + topicOrders + " declares 2 partitions in spec.topics of group \"reset-plan\", so partition 5 does not exist",
			[]string{"--topic", "orders", "--to-auto", "--partitions", "5"}},
	} {
		for _, mode := range []string{"--dry-run", "--execute"} {
			args := append([]string{"reset-offsets", sg.Name, "-n", ns, "--id", "bad", "--timeout", "30s", mode}, tc.args...)
			r := mustFail(t, "", `the operator would refuse reset "bad", `+tc.want, args...)
			if n := strings.Count(r.err.Error(), "refuse"); n != 1 {
				t.Errorf("the error says refuse %d times: %v", n, r.err)
			}
			if strings.Contains(r.err.Error(), "\n") {
				t.Errorf("the error is not one line: %q", r.err)
			}
		}
	}
	if g := getGroup(t, sg); g.Generation != generation || g.Spec.OffsetReset != nil || g.Status.LastOffsetReset != nil {
		t.Fatalf("a reset the operator would refuse was written: generation %d → %d, offsetReset %+v, lastOffsetReset %+v",
			generation, g.Generation, g.Spec.OffsetReset, g.Status.LastOffsetReset)
	}

	for _, tc := range []struct {
		want string
		args []string
	}{
		{"takes one of --dry-run (show the plan, change nothing) and --execute (carry it out)", []string{"--topic", "orders", "--to-earliest"}},
		{"takes one of --dry-run", []string{"--topic", "orders", "--to-earliest", "--dry-run", "--execute"}},
		{`topic "nope" is neither a Kafka topic id`, []string{"--topic", "nope", "--to-earliest", "--execute"}},
		{"it declares orders (" + topicOrders + ")", []string{"--topic", "nope", "--to-earliest", "--execute"}},
		{"is the zero Uuid", []string{"--topic", "AAAAAAAAAAAAAAAAAAAAAA", "--to-earliest", "--execute"}},
		{`topic "q1Sh0o2QRbuBzMz8vEMbvR" is neither`, []string{"--topic", "q1Sh0o2QRbuBzMz8vEMbvR", "--to-earliest", "--execute"}}, // stray bits in the last character
		{"exactly one of --to-earliest, --to-latest, --to-offset N and --to-auto", []string{"--topic", "orders", "--execute"}},
		{"exactly one of --to-earliest, --to-latest, --to-offset N and --to-auto", []string{"--topic", "orders", "--to-earliest", "--to-offset", "3", "--execute"}},
		{"--to-offset -1 is negative", []string{"--topic", "orders", "--to-offset", "-1", "--execute"}},
		{"partition -2 is negative", []string{"--topic", "orders", "--to-auto", "--partitions", "1,-2", "--execute"}},
		{`--id "-x-"`, []string{"--topic", "orders", "--to-auto", "--id", "-x-", "--execute"}},
		{"--topic is required", []string{"--to-auto", "--execute"}},
	} {
		mustFail(t, "", tc.want, append([]string{"reset-offsets", sg.Name, "-n", ns}, tc.args...)...)
	}
	if g := getGroup(t, sg); g.Generation != generation {
		t.Fatalf("bad input changed the group: generation %d → %d", generation, g.Generation)
	}
	mustFail(t, "", `no ShareGroup named "missing"`, "reset-offsets", "missing", "-n", ns, "--topic", topicOrders, "--to-auto", "--execute")
}

// A request the operator refuses after it was written (the group changed between the command's plan
// and its write) is taken back out of the spec, conditionally on the group as the refusal was read.
func TestResetOffsetsTakesARefusedRequestBack(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	sg := declareGroup(t, ns, "reset-taken-back", 2)
	// A merge patch, not an update: the operator adds its finalizer meanwhile.
	patch := client.MergeFrom(sg.DeepCopy())
	sg.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: "late", Topics: []sharestatev1.OffsetResetTopic{
		{TopicID: topicOrders, To: sharestatev1.OffsetResetToEarliest, Partitions: []int32{5}}}}
	if err := env.Client.Patch(ctx, sg, patch); err != nil {
		t.Fatal(err)
	}

	_, err := plugin.WaitResetForTest(ctx, env.Client, sg, "late", 30*time.Second)
	// The reason is the operator's word for an undeclared topic or partition.
	want := regexp.MustCompile(`^the operator refused reset "late" \(ResetUndeclared\w+\): topic ` + topicOrders +
		` declares 2 partitions in spec\.topics of group "reset-taken-back", so partition 5 does not exist; raise its partitions or leave 5 out;` +
		` the request was taken back out of spec\.offsetReset$`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("waiting for a refused reset: error %v, want %q", err, want)
	}
	if g := getGroup(t, sg); g.Spec.OffsetReset != nil || g.Status.LastOffsetReset != nil {
		t.Fatalf("the refused request stayed: offsetReset %+v, lastOffsetReset %+v", g.Spec.OffsetReset, g.Status.LastOffsetReset)
	}
}

func batchStrings[T ~string](batches []T) []string {
	out := make([]string, len(batches))
	for i, b := range batches {
		out[i] = string(b)
	}
	return out
}
