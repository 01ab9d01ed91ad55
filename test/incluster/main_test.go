//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/cluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The images `make test-cluster` builds into $CLUSTER_IMAGES, named apart from the release's so that
// nothing here passes for a published image: the chart is installed with --set overrides naming them.
const (
	imageRepo     = "localhost/sharestate"
	imageTag      = "dev"
	operatorImage = imageRepo + "/sharestate-operator"
	sidecarImage  = imageRepo + "/sharestate-sidecar"
	standInImage  = imageRepo + "/standin:" + imageTag
	pauseImage    = imageRepo + "/pause:" + imageTag
)

// The names the README's install command gives.
const (
	release          = "sharestate"
	releaseNamespace = "sharestate-system"
	brokerNamespace  = "kafka"
	brokerAccount    = "kafka-broker"
	operatorName     = "sharestate-sharestate-operator" // the release's full name
)

var (
	kube *cluster.Cluster
	cl   client.Client
	// bin holds kubectl, helm and the kubectl plugin, first on the PATH of every command a test runs.
	bin string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	images, err := filepath.Glob(filepath.Join(os.Getenv("CLUSTER_IMAGES"), "*.tar"))
	if err != nil || len(images) < 4 {
		fmt.Fprintln(os.Stderr, "CLUSTER_IMAGES must hold the images: run `make test-cluster`")
		return 1
	}
	if bin, err = toolDir(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	began := time.Now()
	kube, err = cluster.Start(context.Background(), cluster.Options{Images: images, PauseImage: pauseImage, Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "incluster: the cluster started in %.1fs (its logs: %s)\n", time.Since(began).Seconds(), filepath.Join(kube.Dir, "logs"))
	code := 1
	if cl, err = newClient(); err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	if err := kube.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the cluster:", err)
		code = 1
	}
	return code
}

func newClient() (client.Client, error) {
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := sharestatev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(kube.Config, client.Options{Scheme: scheme})
}

// toolDir links kubectl and helm into a directory of their own and builds the kubectl plugin there,
// as a user's PATH would hold them.
func toolDir() (string, error) {
	dir, err := os.MkdirTemp("", "incluster-bin-")
	if err != nil {
		return "", err
	}
	for name, path := range map[string]string{
		"kubectl": filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"),
		"helm":    os.Getenv("HELM"),
	} {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("%s (%q): %w; run `make test-cluster`", name, path, err)
		}
		if err := os.Symlink(path, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	build := exec.Command("go", "build", "-o", dir, "./cmd/kubectl-sharestate")
	build.Dir = testenv.RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the kubectl plugin: %w: %s", err, out)
	}
	return dir, nil
}

// sh runs a bash script in the repository's top directory, as a user's shell there would, with the
// cluster's kubeconfig, and fails t with its output when a command of it fails.
func sh(t *testing.T, script string) string {
	t.Helper()
	out, err := trySh(script)
	t.Logf("$ %s\n%s", strings.ReplaceAll(script, "\n", "\n$ "), out)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return out
}

func trySh(script string) (string, error) {
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kube.Kubeconfig, "PATH="+bin+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// logOnFailure runs script when t has failed and writes what it prints to a file in t's artifact
// directory (`go test -artifacts`, which `make test-cluster` passes), logging only the file's path: the
// failure's own message stays the last thing t printed, where a reader of CI's end of the log sees it.
func logOnFailure(t *testing.T, what, script string) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, err := trySh(script)
		if err != nil {
			out += "\n" + err.Error()
		}
		path := filepath.Join(t.ArtifactDir(), "on-failure.log")
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Logf("%s: writing %s: %v", what, path, err)
			return
		}
		t.Logf("%s: %s", what, path)
	})
}

// eventually polls cond every 200 ms until it returns nil, and fails t with its last error after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	if err := testenv.Poll(timeout, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
