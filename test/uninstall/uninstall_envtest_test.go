package uninstall_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // the operator's logs are not what these tests look at
	os.Exit(m.Run())
}

const (
	spsCRD = "sharepartitionstates.sharestate.dev"
	sgCRD  = "sharegroups.sharestate.dev"
	topic  = "q1Sh0o2QRbuBzMz8vEMbvQ"
)

// startEnv starts a control plane of the test's own, stopped when the test ends.
func startEnv(t *testing.T) *testenv.Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a control plane; skipped with -short (run `make test`)")
	}
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	if err := apiextensionsv1.AddToScheme(env.Scheme); err != nil {
		t.Fatal(err)
	}
	return env
}

// groupWithState creates a ShareGroup in a new namespace and, through a persister, one partition's
// state, which the persister labels with the group's name.
func groupWithState(t *testing.T, env *testenv.Env, group string) *sharestatev1.ShareGroup {
	t.Helper()
	ctx := context.Background()
	ns := env.Namespace(t)
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName(group)},
		Spec:       sharestatev1.ShareGroupSpec{GroupID: sharestatev1.GroupID(group)},
	}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	p, err := persister.New(persister.Options{Client: env.Client, Namespace: ns, Identity: persister.Identity{PodName: "broker-0"}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := sharestate.ParseTopicID(topic)
	if err != nil {
		t.Fatal(err)
	}
	resp := p.Initialize(ctx, sharestate.InitializeRequest{GroupID: group, Topics: []sharestate.TopicData[sharestate.InitializePartition]{
		{TopicID: id, Partitions: []sharestate.InitializePartition{{Partition: 0, StateEpoch: 1, StartOffset: 0}}}}})
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != sharestate.ErrNone {
		t.Fatalf("initialize: %s", code)
	}
	return sg
}

// waitGone waits until the object is NotFound.
func waitGone(t *testing.T, c client.Client, timeout time.Duration, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, timeout, func() error {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("%s still exists (deletion %v, finalizers %v)", obj.GetName(), obj.GetDeletionTimestamp(), obj.GetFinalizers())
	})
}

func crd(name string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestFinalizerLetsGroupGoOnceStateKindIsGone: with the operator running, the SharePartitionState CRD
// is deleted first (as `make uninstall` does); a ShareGroup deleted afterwards must not be held by its
// finalizer, whose job, deleting the group's state, the CRD's deletion has done.
func TestFinalizerLetsGroupGoOnceStateKindIsGone(t *testing.T) {
	env := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := operator.NewManager(ctx, env.Config, operator.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the manager stopped with %v", err)
		}
	})

	sg := groupWithState(t, env, "orders")
	testenv.Eventually(t, 30*time.Second, func() error {
		var got sharestatev1.ShareGroup
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sg), &got); err != nil {
			return err
		}
		if !controllerutil.ContainsFinalizer(&got, sharestatev1.FinalizerPartitionState) {
			return errors.New("the operator has not added its finalizer yet")
		}
		return nil
	})

	if err := env.Client.Delete(ctx, crd(spsCRD)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Client, 60*time.Second, crd(spsCRD))
	if err := env.Client.Delete(ctx, sg); err != nil {
		t.Fatal(err)
	}
	waitGone(t, env.Client, 30*time.Second, sg)
}

// TestChartREADMERemovingCRDs runs the commands of the chart README's "Removing the CRDs", as written,
// on a cluster where no operator runs (the chart is uninstalled), with a ShareGroup holding the
// operator's finalizer.
func TestChartREADMERemovingCRDs(t *testing.T) {
	env := startEnv(t)
	held := groupWithState(t, env, "orders")
	controllerutil.AddFinalizer(held, sharestatev1.FinalizerPartitionState)
	if err := env.Client.Update(context.Background(), held); err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts", "sharestate-operator", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	commands, err := shellBlockAfter(string(readme), "## Removing the CRDs")
	if err != nil {
		t.Fatal(err)
	}
	run := exec.Command("bash", "-euo", "pipefail", "-c", commands)
	run.Env = append(os.Environ(), "KUBECONFIG="+testenv.AdminKubeconfig(t, env.Config),
		"PATH="+os.Getenv("KUBEBUILDER_ASSETS")+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("the README's commands: %v\n%s", err, out)
	}
	assertCRDsGone(t, env, "")
}

// shellBlockAfter returns the first ```sh block after the heading.
func shellBlockAfter(markdown, heading string) (string, error) {
	_, section, ok := strings.Cut(markdown, "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("no heading %q", heading)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	if !ok {
		return "", fmt.Errorf("no sh block after %q", heading)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		return "", fmt.Errorf("the sh block after %q does not end", heading)
	}
	return block, nil
}

func assertCRDsGone(t *testing.T, env *testenv.Env, output string) {
	t.Helper()
	for _, name := range []string{spsCRD, sgCRD} {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd(name)); !apierrors.IsNotFound(err) {
			t.Errorf("CRD %s: %v (want NotFound)\n%s", name, err, output)
		}
	}
}

// TestUninstallScriptWithoutOperator runs `make uninstall`'s script on a cluster where no operator
// runs, with a ShareGroup holding the operator's finalizer and another finalizer-free one: both CRDs
// must go, within the script's own timeout.
func TestUninstallScriptWithoutOperator(t *testing.T) {
	env := startEnv(t)
	ctx := context.Background()
	held := groupWithState(t, env, "orders")
	controllerutil.AddFinalizer(held, sharestatev1.FinalizerPartitionState)
	if err := env.Client.Update(ctx, held); err != nil {
		t.Fatal(err)
	}
	groupWithState(t, env, "payments")

	script := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "uninstall-crds.sh"))
	script.Env = append(os.Environ(),
		"KUBECONFIG="+testenv.AdminKubeconfig(t, env.Config),
		"KUBECTL="+filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"),
		"TIMEOUT_SECONDS=60")
	out, err := script.CombinedOutput()
	if err != nil {
		t.Fatalf("uninstall-crds.sh: %v\n%s", err, out)
	}
	assertCRDsGone(t, env, string(out))
}
