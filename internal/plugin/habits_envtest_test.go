package plugin_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/plugin"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// describe and delete without the kind ("group") fail, printing no help, and say what to run: they
// used to print their help and exit 0, and a script that forgot "group" took the group for deleted.
func TestKindIsRequired(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	sg := declareGroup(t, ns, "kind-orders", 1)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{`"` + sg.Name + `" is not a kind describe knows (group): to describe the share group "` + sg.Name +
			`", run kubectl sharestate describe group ` + sg.Name, []string{"describe", sg.Name, "-n", ns}},
		{`"` + sg.Name + `" is not a kind delete knows (group): to delete the share group "` + sg.Name +
			`", run kubectl sharestate delete group ` + sg.Name, []string{"delete", sg.Name, "-n", ns, "--yes"}},
		{"describe needs the kind of what to describe: kubectl sharestate describe group NAME", []string{"describe"}},
		{"delete needs the kind of what to delete: kubectl sharestate delete group NAME", []string{"delete", "-n", ns}},
		{`unknown kind "gruop" for "kubectl sharestate describe"; did you mean "group"?`, []string{"describe", "gruop", sg.Name}},
	} {
		r := mustFail(t, "", "", tc.args...)
		if line := plugin.ErrorLine(r.err); line != tc.want {
			t.Errorf("kubectl sharestate %s: error %q, want %q", strings.Join(tc.args, " "), line, tc.want)
		}
		if r.out != "" || r.errOut != "" {
			t.Errorf("kubectl sharestate %s printed besides its error: out %q, errOut %q", strings.Join(tc.args, " "), r.out, r.errOut)
		}
	}
	if g := getGroup(t, sg); !g.DeletionTimestamp.IsZero() {
		t.Fatalf("delete without the kind deleted the group")
	}
}

// describe of several groups, one missing, shows the ones that exist and then fails for the missing
// one, as kubectl describe does; it used to show nothing.
func TestDescribeShowsWhatExistsThenFails(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	alpha := declareGroup(t, ns, "partial-alpha", 1)
	beta := declareGroup(t, ns, "partial-beta", 1)
	r := mustFail(t, "", `no ShareGroup named "partial-missing"`, "describe", "group", "partial-alpha", "partial-missing", "partial-beta", "-n", ns)
	if got := describedGroups(r.out); !slices.Equal(got, []string{alpha.Name, beta.Name}) {
		t.Fatalf("describe of alpha, a missing group and beta described %v", got)
	}
	r = mustFail(t, "", `no ShareGroup named "partial-missing"`, "describe", "group", "partial-missing", "partial-alpha", "-n", ns, "-o", "name")
	if r.out != "sharegroup.sharestate.dev/"+alpha.Name+"\n" {
		t.Fatalf("describe -o name of a missing group and alpha printed %q", r.out)
	}
}

// list -o wide adds the initialized and led partitions, the records in flight and Ready's message.
func TestListWide(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	sg := declareGroup(t, ns, "wide-orders", 1)
	b := newBroker(t, ns, "wide-orders", 1, brokerPod(t, ns, "broker-1"))
	b.initialize(0, 0, 0)
	b.read(0, 1)
	b.mustWrite(0, 0, 1, 0, batch(0, 2, sharestate.DeliveryStateAvailable, 1))
	waitState(t, sg, sharestatev1.ReasonAllPartitionsReady)
	waitInFlight(t, sg, 3)

	out := mustRun(t, "list", "-n", ns, "-o", "wide")
	lineMatching(t, out, `^NAME\s+GROUP ID\s+STATE\s+PARTITIONS\s+FENCED\s+STATE EPOCH\s+AGE\s+INITIALIZED\s+WITH LEADER\s+IN FLIGHT\s+MESSAGE$`)
	lineMatching(t, out, `^`+sg.Name+`\s+wide-orders\s+Ready\s+1\s+0\s+0\s+\S+\s+1\s+1\s+3\s+1 partitions initialized, 1 with a leader$`)
	out = mustRun(t, "list", "-A", "-o", "wide")
	lineMatching(t, out, `^NAMESPACE\s+NAME\s+GROUP ID\s+.*\s+MESSAGE$`)
	lineMatching(t, out, `^`+ns+`\s+`+sg.Name+`\s+wide-orders\s+Ready\s+.*\s+1 partitions initialized, 1 with a leader$`)
	if out := mustRun(t, "list", "-n", ns); strings.Contains(out, "MESSAGE") || strings.Contains(out, "with a leader") {
		t.Fatalf("list without -o wide shows the wide columns:\n%s", out)
	}
}

// reset-offsets takes kubectl's --dry-run values besides Kafka's bare --dry-run: client is the bare
// one; server also has the API server check the request, storing nothing; none is no dry run. And
// --to-latest, as Kafka's tool has it.
func TestResetOffsetsDryRunModesAndToLatest(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	const group = "modes-orders"
	sg := declareGroup(t, ns, group, 2)
	b := newBroker(t, ns, group, 1, nil)
	b.initialize(0, 0, 10)
	b.initialize(1, 0, 10)
	generation := getGroup(t, sg).Generation
	reset := []string{"reset-offsets", sg.Name, "-n", ns, "--topic", "orders"}

	for _, dry := range []string{"--dry-run", "--dry-run=client", "--dry-run=true", "--dry-run=server"} {
		out := mustRun(t, append(reset, "--to-offset", "5", "--id", "m1", dry)...)
		lineMatching(t, out, `^Dry run: nothing was changed\. The request for ShareGroup `)
		lineMatching(t, out, `^The operator would initialize 2 partitions at state epoch 1 `)
		accepted := strings.Contains(out, `The API server accepted reset "m1" (a server dry run: checked, not stored).`)
		if accepted != (dry == "--dry-run=server") {
			t.Errorf("%s: the API server's check reported %v, want %v:\n%s", dry, accepted, dry == "--dry-run=server", out)
		}
	}
	mustFail(t, "", `invalid argument "bogus" for "--dry-run" flag: want none, client or server`, append(reset, "--to-earliest", "--dry-run=bogus")...)
	mustFail(t, "", "takes one of --dry-run", append(reset, "--to-earliest", "--dry-run=none")...)
	mustFail(t, "", "takes one of --dry-run", append(reset, "--to-earliest", "--dry-run=server", "--execute")...)
	if g := getGroup(t, sg); g.Generation != generation || g.Spec.OffsetReset != nil {
		t.Fatalf("a dry run changed the group: generation %d → %d, offsetReset %+v", generation, g.Generation, g.Spec.OffsetReset)
	}

	out := mustRun(t, append(reset, "--to-latest", "--id", "l1", "--timeout", "30s", "--execute")...)
	lineMatching(t, out, `^\s+(- )?to: AutoOffsetReset$`)
	lineMatching(t, out, `^With --to-latest the start offset is cleared \(-1\): each leader starts from the log end when it next reads its partition; share\.auto\.offset\.reset is latest by Kafka's default`)
	lineMatching(t, out, `^Offset reset "l1" of group "modes-orders" .* completed: 2 partitions initialized at state epoch 1\.$`)
	for part := range int32(2) {
		if s := getPartition(t, ns, group, part).Status; s.StartOffset != -1 || s.StateEpoch != 1 {
			t.Fatalf("partition %d after --to-latest: start offset %d at state epoch %d, want -1 at 1", part, s.StartOffset, s.StateEpoch)
		}
	}

	// A group whose share.auto.offset.reset is not latest: clearing the start offset would not start
	// at the log end.
	patch := []byte(`{"spec":{"settings":{"autoOffsetReset":"earliest"}}}`)
	if err := env.Client.Patch(ctx, sg, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	mustFail(t, "", `--to-latest clears the start offset, and each leader then applies share.auto.offset.reset, which group "modes-orders" declares as "earliest"`,
		append(reset, "--to-latest", "--dry-run")...)
}

// waitInFlight waits until the operator's totals show the group's records in flight.
func waitInFlight(t *testing.T, sg *sharestatev1.ShareGroup, want int64) {
	t.Helper()
	testenv.Eventually(t, 45*time.Second, func() error {
		if got := getGroup(t, sg).Status.InFlightRecords; got != want {
			return fmt.Errorf("group %s: %d records in flight, want %d", sg.Name, got, want)
		}
		return nil
	})
}
