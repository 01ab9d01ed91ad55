package kubeconfig

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// noKubeconfigAnywhere makes the environment one where Load finds nothing: no flag, no $KUBECONFIG,
// no service account (KUBERNETES_SERVICE_HOST unset), an empty home.
func noKubeconfigAnywhere(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("HOME", t.TempDir())
}

func TestLoadWithoutAnyConfigSaysWhatToDo(t *testing.T) {
	noKubeconfigAnywhere(t)
	_, err := Load()
	if !errors.Is(err, ErrNoConfig) {
		t.Fatalf("Load() = %v, want ErrNoConfig", err)
	}
	if msg := err.Error(); strings.Contains(msg, "KUBERNETES_MASTER") || strings.Contains(msg, "\n") || !strings.Contains(msg, "--kubeconfig") {
		t.Errorf("message %q: want one line naming --kubeconfig, without KUBERNETES_MASTER", msg)
	}
}

func TestLoadReadsTheKubeconfigFlag(t *testing.T) {
	noKubeconfigAnywhere(t)
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://example.invalid:6443"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	fs := flag.CommandLine
	if fs.Lookup("kubeconfig") == nil {
		fs.String("kubeconfig", "", "")
	}
	if err := fs.Set("kubeconfig", path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Set("kubeconfig", "") })
	cfg, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://example.invalid:6443" || cfg.QPS != -1 {
		t.Errorf("host %q qps %v, want the file's server and no client-side limit", cfg.Host, cfg.QPS)
	}
}

func TestExplain(t *testing.T) {
	if err := Explain(nil); err != nil {
		t.Errorf("Explain(nil) = %v", err)
	}
	// What genericclioptions' ToRESTConfig returns with no configuration, as the plugin wraps it.
	_, empty := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{}, nil).ClientConfig()
	if !clientcmd.IsEmptyConfig(empty) {
		t.Fatalf("setup: %v is not client-go's empty-config error", empty)
	}
	for _, err := range []error{empty, clientcmd.ErrEmptyConfig, errWrap{empty}} {
		if got := Explain(err); !errors.Is(got, ErrNoConfig) {
			t.Errorf("Explain(%v) = %v, want ErrNoConfig", err, got)
		}
	}
	other := errors.New(`context "x" does not exist`)
	if got := Explain(other); !errors.Is(got, other) {
		t.Errorf("Explain(%v) = %v, want it kept", other, got)
	}
}

type errWrap struct{ err error }

func (e errWrap) Error() string { return "getting config: " + e.err.Error() }
func (e errWrap) Unwrap() error { return e.err }

func TestCheckReachableNamesServerAndCause(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now: connection refused
	err = CheckReachable(context.Background(), &rest.Config{Host: "https://" + addr})
	if err == nil {
		t.Fatal("CheckReachable of a closed port succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, "cannot reach the Kubernetes API server at https://"+addr) || !strings.Contains(msg, "connection refused") || strings.Contains(msg, "\n") {
		t.Errorf("message %q: want one line with the server and the cause", msg)
	}
}

// writeConfig writes a kubeconfig naming server into dir and returns its path.
func writeConfig(t *testing.T, dir, server string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+server+`"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAMissingNamedFileIsNamed: client-go skips the files of $KUBECONFIG that do not exist and then
// reports no configuration, which named no file; the user named one, and must be told it is missing.
func TestAMissingNamedFileIsNamed(t *testing.T) {
	noKubeconfigAnywhere(t)
	missing := filepath.Join(t.TempDir(), "nonexistent")
	t.Setenv("KUBECONFIG", missing)
	want := "$KUBECONFIG names " + missing + ", which does not exist"
	_, err := Load()
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrNoConfig) {
		t.Errorf("Load() = %v, want an ErrNoConfig saying %q", err, want)
	}
	// The plugin checks for a configuration itself and passes ErrNoConfig, or client-go's error, through Explain.
	_, empty := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{}, nil).ClientConfig()
	for _, in := range []error{ErrNoConfig, errWrap{empty}} {
		if err := Explain(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Explain(%v) = %v, want %q", in, err, want)
		}
	}
}

func TestAMissingKubeconfigFlagIsNamed(t *testing.T) {
	noKubeconfigAnywhere(t)
	missing := filepath.Join(t.TempDir(), "nonexistent")
	fs := flag.CommandLine
	if fs.Lookup("kubeconfig") == nil {
		fs.String("kubeconfig", "", "")
	}
	if err := fs.Set("kubeconfig", missing); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fs.Set("kubeconfig", "") })
	want := "--kubeconfig names " + missing + ", which does not exist"
	if _, err := Load(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Load() = %v, want %q", err, want)
	}
}

func TestLoadFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "a")
	present := writeConfig(t, t.TempDir(), "https://example.invalid:6443")
	cfg, err := LoadFiles("$KUBECONFIG", missing+string(filepath.ListSeparator)+present)
	if err != nil || cfg.Host != "https://example.invalid:6443" {
		t.Fatalf("LoadFiles(missing:present) = %v, %v; want the present file's server", cfg, err)
	}
	other := filepath.Join(dir, "b")
	_, err = LoadFiles("$KUBECONFIG", missing+string(filepath.ListSeparator)+other)
	want := "$KUBECONFIG names " + missing + ", " + other + ", none of which exists"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("LoadFiles(two missing) = %v, want %q", err, want)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err = LoadFiles("--kubeconfig", empty); err == nil || !strings.Contains(err.Error(), "configures no cluster") {
		t.Errorf("LoadFiles(empty file) = %v, want it to say the file configures no cluster", err)
	}
}
