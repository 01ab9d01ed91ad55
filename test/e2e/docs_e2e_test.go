//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The share group of config/samples/sharestate_v1alpha1_sharegroup.yaml, which the README applies.
const (
	sampleGroupName = "orders"
	sampleGroupID   = "orders-processors"
	sampleTopicID   = "q1Sh0o2QRbuBzMz8vEMbvQ"
)

// TestDocumentedCommands follows the README, the overview, the chart's README and the restore procedure of
// docs/operations.md word for word, on a copy of the working tree standing for a fresh clone: the
// blocks they mark `<!-- docs-test: NAME -->` run unchanged in one shell; the broker StatefulSet of
// docs/kafka-integration.md is applied as a server-side dry run. Between them the test only
// plays the parts a person would: waiting for `make run` and pressing Ctrl-C. The share state comes
// from make run's stand-in broker, as in the Quickstart.
func TestDocumentedCommands(t *testing.T) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal(testenv.ErrNoAssets)
	}
	clone := copyWorkingTree(t, testenv.RepoRoot())
	sh := newcomerShell(t, clone)
	readme := filepath.Join(clone, "README.md")
	chartReadme := filepath.Join(clone, "charts", "sharestate-operator", "README.md")
	operations := filepath.Join(clone, "docs", "operations.md")
	integration := filepath.Join(clone, "docs", "kafka-integration.md")
	overview := filepath.Join(clone, "docs", "overview.md")

	checkQuickstart(t, clone, docBlock(t, readme, "quickstart"))
	checkQuickstart(t, clone, docBlock(t, overview, "overview-commands"))
	sh.run("make helm") // the README: "`make helm` builds the pinned helm into `bin/`"

	run := sh.startBackground("make run", "Press Ctrl-C", 10*time.Minute)
	sh.run(docBlock(t, readme, "try"))
	kubeconfig := sh.getenv("KUBECONFIG")
	if kubeconfig != filepath.Join(clone, ".run", "kubeconfig") {
		t.Fatalf("after the Quickstart KUBECONFIG=%q, want the run directory's", kubeconfig)
	}
	// The stand-in broker's state, a reset, and its pod deleted: it ends fenced, so its partitions'
	// state no longer changes, which the backup and restore below compare.
	sh.run(docBlock(t, readme, "state"))
	sh.run(docBlock(t, overview, "overview-try"))
	checkStandInFenced(context.Background(), t, testenv.KubeClient(t, kubeconfig))
	sh.run(docBlock(t, readme, "crds"))

	t.Run("helm install, uninstall, install under another name", func(t *testing.T) {
		sh.run(docBlock(t, readme, "helm-install"))
		sh.run("helm status sharestate -n sharestate-system")
		if rendered := sh.run(docBlock(t, chartReadme, "render-sidecar")); !strings.Contains(rendered, "initContainers:") ||
			!strings.Contains(rendered, "serviceAccountName: kafka-broker") {
			t.Fatalf("the rendered example holds no sidecar for the release's values:\n%s", rendered)
		}
		sh.run(docBlock(t, chartReadme, "uninstall"))
		sh.run("kubectl get sharegroup " + sampleGroupName) // the kept CRDs kept the objects
		again := strings.Replace(docBlock(t, chartReadme, "install"), "helm install sharestate ", "helm install sharestate-again ", 1)
		if !strings.Contains(again, "sharestate-again") {
			t.Fatal("the chart README's install block has no `helm install sharestate ` to rename")
		}
		sh.run(again)
		sh.run("helm uninstall sharestate-again -n sharestate-system")
	})

	t.Run("the broker StatefulSet of kafka-integration.md", func(t *testing.T) {
		// A cluster without nodes runs no pod, but the API server checks the objects as it would
		// create them: the schema, unknown fields, the StatefulSet's validation. Namespace kafka is
		// the one the README's helm install uses.
		manifest := filepath.Join(t.TempDir(), "broker-statefulset.yaml")
		if err := os.WriteFile(manifest, []byte(docBlock(t, integration, "broker-statefulset")), 0o644); err != nil {
			t.Fatal(err)
		}
		out := sh.run("kubectl apply --dry-run=server -f " + manifest)
		for _, want := range []string{"serviceaccount/kafka-broker", "service/kafka-headless", "statefulset.apps/kafka"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply --dry-run=server did not apply %s:\n%s", want, out)
			}
		}
	})

	t.Run("backup and restore", func(t *testing.T) {
		ctx := context.Background()
		cl := testenv.KubeClient(t, kubeconfig)
		// A reset that ran before the backup stays in the group's spec: the restore must not run it
		// again on the restored state (the restored epochs would then be refused as lowered).
		resetGroup(ctx, t, cl, "before-backup")
		saved := partitionStates(ctx, t, cl)
		if len(saved) == 0 {
			t.Fatal("no share-partition state to back up")
		}
		sh.run(docBlock(t, operations, "backup"))
		deleteGroup(ctx, t, cl)
		sh.run(docBlock(t, operations, "restore"))
		restored := partitionStates(ctx, t, cl)
		if !reflect.DeepEqual(restored, saved) {
			t.Fatalf("restored state differs:\nsaved    %+v\nrestored %+v", saved, restored)
		}
	})

	t.Run("the kubectl plugin", func(t *testing.T) {
		sh.run(docBlock(t, readme, "plugin-install"))
		sh.run(docBlock(t, readme, "plugin"))
	})

	if err := run.interrupt(time.Minute); err != nil {
		t.Fatalf("make run after Ctrl-C: %v, want exit status 0:\n%s", err, run.out.String())
	}
	// The Quickstart's shell still exports KUBECONFIG: make run must start its control plane again.
	again := sh.startBackground("make run", "Press Ctrl-C", 5*time.Minute)
	sh.run("kubectl get sharegroup " + sampleGroupName + " && kubectl get namespace kafka")
	if err := again.interrupt(time.Minute); err != nil {
		t.Fatalf("the second make run after Ctrl-C: %v, want exit status 0:\n%s", err, again.out.String())
	}

	t.Run("make run-kafka", func(t *testing.T) {
		withKafka := sh.startBackground("make run-kafka", "Press Ctrl-C", 10*time.Minute)
		out := sh.run(docBlock(t, readme, "kafka-try"))
		rows := 0
		for line := range strings.Lines(out) {
			if strings.HasPrefix(line, "orders-processors-") { // a SharePartitionState's row, by its name
				rows++
			}
		}
		if rows != 3 {
			t.Fatalf("kubectl get sps -n kafka shows %d partitions of orders-processors, want 3:\n%s", rows, out)
		}
		if err := withKafka.interrupt(2 * time.Minute); err != nil {
			t.Fatalf("make run-kafka after Ctrl-C: %v, want exit status 0:\n%s", err, withKafka.out.String())
		}
	})
}

// newcomerShell is a shell in the clone with what the README asks a newcomer to have on PATH (kubectl,
// here the control plane's own; bin/, where `make helm` builds helm and the README the plugin),
// without a KUBECONFIG, and with a home directory of its own. Go's caches and the control plane's
// binaries stay where they are, so nothing is built twice.
func newcomerShell(t *testing.T, clone string) *shell {
	home := t.TempDir()
	env := []string{
		"HOME=" + home,
		"PATH=" + strings.Join([]string{filepath.Join(clone, "bin"), os.Getenv("KUBEBUILDER_ASSETS"), os.Getenv("PATH")}, ":"),
		"ENVTEST_CACHE_DIR=" + filepath.Dir(os.Getenv("KUBEBUILDER_ASSETS")),
		// Kafka's jars as hack/kafka-assets.sh caches them: the new home has no cache of its own.
		"KAFKA_CACHE_DIR=" + kafkaCacheDir(),
	}
	for _, name := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		env = append(env, name+"="+strings.TrimSpace(string(out)))
	}
	for _, kv := range os.Environ() {
		switch name, _, _ := strings.Cut(kv, "="); name {
		case "HOME", "PATH", "KUBECONFIG", "ENVTEST_CACHE_DIR", "KAFKA_CACHE_DIR", "GOCACHE", "GOMODCACHE", "GOPATH",
			"HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME":
		default:
			env = append(env, kv)
		}
	}
	return &shell{t: t, dir: clone, env: env}
}

// kafkaCacheDir is where hack/kafka-assets.sh keeps Kafka's jars for this user.
func kafkaCacheDir() string {
	if dir := os.Getenv("KAFKA_CACHE_DIR"); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		cache = filepath.Join(os.Getenv("HOME"), ".cache")
	}
	return filepath.Join(cache, "sharestate-operator", "kafka")
}

// checkQuickstart checks that the README's two commands are the ones that run the system and the
// tests, and that CI runs the same test command.
func checkQuickstart(t *testing.T, clone, block string) {
	t.Helper()
	var commands []string
	for _, line := range strings.Split(block, "\n") {
		if command, _, _ := strings.Cut(line, "#"); strings.TrimSpace(command) != "" {
			commands = append(commands, strings.TrimSpace(command))
		}
	}
	if !reflect.DeepEqual(commands, []string{"make run", "make test"}) {
		t.Fatalf("the Quickstart's commands are %q, want make run and make test", commands)
	}
	ci, err := os.ReadFile(filepath.Join(clone, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !runsCommand(string(ci), "make test") {
		t.Fatal(".ci/run does not run the README's test command, make test")
	}
}

// runsCommand reports whether the script has a line that runs command as written, alone or after
// the name of a wrapper that runs its arguments (as .ci/run's step, which times each command).
func runsCommand(script, command string) bool {
	for _, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == command || line == "step "+command {
			return true
		}
	}
	return false
}

// checkStandInFenced checks what the Quickstart's state block shows: the stand-in broker's four
// partitions, fenced with its pod as the fenced leader, and written by it (all but partition 0,
// whose reset cleared its count of writes just before the pod was deleted).
func checkStandInFenced(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	var list sharestatev1.SharePartitionStateList
	if err := cl.List(ctx, &list, client.InNamespace("default"), client.MatchingLabels{sharestatev1.LabelShareGroup: sampleGroupName}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 4 {
		t.Fatalf("the sample group has %d partitions with state, want the stand-in broker's 4", len(list.Items))
	}
	for _, sps := range list.Items {
		s := sps.Status
		if s.FencedLeader == nil || s.FencedLeader.PodName != "local-broker-0" || s.Leader != nil {
			t.Errorf("partition %d: fenced leader %+v, leader %+v; want local-broker-0 fenced", sps.Spec.Partition, s.FencedLeader, s.Leader)
		}
		if sps.Spec.Partition != 0 && s.WriteCount == 0 {
			t.Errorf("partition %d: no write since it was initialized, want the stand-in's", sps.Spec.Partition)
		}
	}
}

// storedState is what a restore must bring back of a share-partition: its Kafka key and stored state.
type storedState struct {
	Partition               int32
	StateEpoch, LeaderEpoch int32
	StartOffset             int64
	Batches                 []sharestatev1.StateBatch
}

// partitionStates returns the stored state of the sample group's partitions in namespace default.
func partitionStates(ctx context.Context, t *testing.T, cl client.Client) map[string]storedState {
	t.Helper()
	var list sharestatev1.SharePartitionStateList
	if err := cl.List(ctx, &list, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	states := map[string]storedState{}
	for _, sps := range list.Items {
		if sps.Spec.GroupID != sampleGroupID || sps.Status.CreateTime == nil {
			continue
		}
		states[sps.Name] = storedState{Partition: sps.Spec.Partition, StateEpoch: sps.Status.StateEpoch,
			LeaderEpoch: sps.Status.LeaderEpoch, StartOffset: sps.Status.StartOffset, Batches: sps.Status.StateBatches}
	}
	return states
}

// resetGroup resets every partition of the sample group's topic to offset 100 with a request of the
// given id, and waits until the operator reports it done.
func resetGroup(ctx context.Context, t *testing.T, cl client.Client, id string) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"offsetReset":{"id":%q,"topics":[{"topicId":%q,"to":"Offset","offset":100}]}}}`, id, sampleTopicID)
	group := &sharestatev1.ShareGroup{}
	group.Namespace, group.Name = "default", sampleGroupName
	if err := cl.Patch(ctx, group, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	err := testenv.Poll(time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(group), group); err != nil {
			return err
		}
		if r := group.Status.LastOffsetReset; r == nil || r.ID != id || r.CompletionTime == nil {
			return fmt.Errorf("reset %s not done: %+v", id, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deleteGroup deletes the sample ShareGroup and waits until the operator has deleted its partitions'
// state and the group is gone: the loss a restore repairs.
func deleteGroup(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	group := &sharestatev1.ShareGroup{}
	group.Namespace, group.Name = "default", sampleGroupName
	if err := cl.Delete(ctx, group); err != nil {
		t.Fatal(err)
	}
	err := testenv.Poll(time.Minute, func() error {
		if err := cl.Get(ctx, client.ObjectKeyFromObject(group), &sharestatev1.ShareGroup{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the group is still there (get: %w)", err)
		}
		if n := len(partitionStates(ctx, t, cl)); n != 0 {
			return fmt.Errorf("%d partitions' state still there", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
