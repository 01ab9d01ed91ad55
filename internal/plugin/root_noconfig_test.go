package plugin_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	kubeconfigpkg "github.com/sharestate/sharestate-operator/internal/kubeconfig"
	"github.com/sharestate/sharestate-operator/internal/plugin"
)

// TestNoConfigurationSaysSo: with no kubeconfig naming a cluster and no --server, the plugin says
// that nothing is configured, instead of client-go's fallback to http://localhost:8080 and its
// refused connection to a server the user never named. With --server, that server is used.
func TestNoConfigurationSaysSo(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", empty)
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // not in a pod
	run := func(args ...string) error {
		streams, _, _, _ := genericiooptions.NewTestIOStreams()
		cmd := plugin.NewCommand(genericclioptions.NewConfigFlags(false), streams)
		cmd.SetArgs(args)
		return cmd.Execute()
	}
	if err := run("list"); !errors.Is(err, kubeconfigpkg.ErrNoConfig) {
		t.Fatalf("list with nothing configured: %v, want %v", err, kubeconfigpkg.ErrNoConfig)
	}
	err := run("list", "--server", "https://127.0.0.1:1")
	if err == nil || errors.Is(err, kubeconfigpkg.ErrNoConfig) {
		t.Fatalf("list --server: %v, want a failure to reach 127.0.0.1:1", err)
	}
}
