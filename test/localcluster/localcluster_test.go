package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// writeKubeconfig writes a kubeconfig naming an API server at addr into dir, as startLocal would.
func writeKubeconfig(t *testing.T, dir, addr string) string {
	t.Helper()
	path := filepath.Join(dir, kubeconfigFile)
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: "https://%s"}}]
contexts: [{name: local, context: {cluster: local, user: admin}}]
current-context: local
users: [{name: admin, user: {token: x}}]
`, addr)
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// closedAddress returns a loopback address nothing listens at.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

func TestStoppedLocalControlPlaneIsRecognised(t *testing.T) {
	runDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(runDir, etcdDataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	path := writeKubeconfig(t, runDir, closedAddress(t))
	got, stopped := stoppedLocalControlPlane(path)
	if !stopped || got != runDir {
		t.Fatalf("stoppedLocalControlPlane(%s) = %q, %v; want %q, true", path, got, stopped, runDir)
	}
}

func TestRunningOrForeignClustersAreUsedAsTheyAre(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	running := t.TempDir()
	if err := os.Mkdir(filepath.Join(running, etcdDataDir), 0o700); err != nil {
		t.Fatal(err)
	}
	foreign := t.TempDir() // a kubeconfig of some cluster: no etcd data beside it
	for name, path := range map[string]string{
		"a running local control plane": writeKubeconfig(t, running, l.Addr().String()),
		"another cluster's kubeconfig":  writeKubeconfig(t, foreign, closedAddress(t)),
	} {
		if dir, stopped := stoppedLocalControlPlane(path); stopped {
			t.Errorf("%s: taken for the stopped local control plane in %s", name, dir)
		}
	}
}

// TestMakeRunAgainWithItsOwnKubeconfig is the Quickstart's sequence: `make run`, Ctrl-C, then `make run`
// again in a shell where KUBECONFIG names the first run's kubeconfig. The second start must bring the
// same local control plane (and its objects) back, not try to connect to the stopped one.
func TestMakeRunAgainWithItsOwnKubeconfig(t *testing.T) {
	if testing.Short() || os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("needs the control-plane binaries (run `make test`)")
	}
	crds := filepath.Join(testenv.RepoRoot(), "config", "crd", "bases")
	runDir := t.TempDir()
	first, err := Start(Options{RunDir: runDir, CRDDir: crds})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "survives-a-restart"}}
	if err := createIn(ctx, first, marker); err != nil {
		_ = first.Stop(ctx)
		t.Fatal(err)
	}
	if err := first.Stop(ctx); err != nil {
		t.Fatal(err)
	}

	second, err := Start(Options{RunDir: t.TempDir(), CRDDir: crds, Kubeconfig: first.KubeconfigPath})
	if err != nil {
		t.Fatalf("starting again with KUBECONFIG=%s: %v", first.KubeconfigPath, err)
	}
	defer func() { _ = second.Stop(ctx) }()
	if !second.Local || second.KubeconfigPath != first.KubeconfigPath {
		t.Fatalf("second start: local=%v kubeconfig=%s; want the local control plane of %s", second.Local, second.KubeconfigPath, runDir)
	}
	cl, err := client.New(second.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(marker), &corev1.ConfigMap{}); err != nil {
		t.Fatalf("the first run's objects are gone: %v", err)
	}
}

func createIn(ctx context.Context, c *Cluster, obj client.Object) error {
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return err
	}
	return cl.Create(ctx, obj)
}

// TestAMissingKubeconfigIsNamed: `KUBECONFIG=/nonexistent make run` says that the file it names does
// not exist, and what happens without it.
func TestAMissingKubeconfigIsNamed(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nonexistent")
	_, err := Start(Options{RunDir: t.TempDir(), Kubeconfig: missing, KubeconfigSource: "$KUBECONFIG"})
	want := "$KUBECONFIG names " + missing + ", which does not exist; without it, a local control plane is started"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Start with a missing kubeconfig: %v; want %q", err, want)
	}
}
