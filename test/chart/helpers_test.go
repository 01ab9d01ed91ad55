package chart_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const (
	modulePath = "github.com/sharestate/sharestate-operator"
	chartDir   = "charts/sharestate-operator"
	// release and namespace are those of every rendering; fullname is the chart's object name prefix.
	release   = "sharestate"
	namespace = "sharestate-system"
	fullname  = "sharestate-sharestate-operator"
)

var (
	// repoRoot is the repository's root directory; every path of the tests is relative to it.
	repoRoot string
	// helmBin is the helm the tests run: $HELM, or bin/helm built from hack/tools/helm/go.mod.
	helmBin string
	// helmHome holds helm's configuration, cache and data: none of the machine's user's.
	helmHome string
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "chart tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(helmHome)
	os.Exit(code)
}

func setup() error {
	root, err := findRepoRoot()
	if err != nil {
		return err
	}
	repoRoot = root
	if helmHome, err = os.MkdirTemp("", "chart-test-helm-"); err != nil {
		return err
	}
	if helmBin = os.Getenv("HELM"); helmBin != "" {
		return nil
	}
	helmBin = filepath.Join(repoRoot, "bin", "helm")
	return ensureHelm()
}

// findRepoRoot walks up from the working directory to the module's go.mod.
func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.HasPrefix(data, []byte("module "+modulePath+"\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod of " + modulePath + " above the working directory")
		}
		dir = parent
	}
}

// ensureHelm builds bin/helm with hack/tools/helm/build.sh unless it already is the version that
// hack/tools/helm/go.mod pins.
func ensureHelm() error {
	want, err := pinnedHelmVersion()
	if err != nil {
		return err
	}
	got, err := exec.Command(helmBin, "version", "--template", "{{.Version}}").Output()
	if err == nil && string(got) == want {
		return nil
	}
	fmt.Fprintf(os.Stderr, "chart tests: building helm %s into %s\n", want, helmBin)
	build := exec.Command(filepath.Join(repoRoot, "hack", "tools", "helm", "build.sh"), helmBin)
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building helm: %w", err)
	}
	return nil
}

var helmRequire = regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v3 (v\S+)`)

func pinnedHelmVersion() (string, error) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "hack", "tools", "helm", "go.mod"))
	if err != nil {
		return "", err
	}
	m := helmRequire.FindSubmatch(data)
	if m == nil {
		return "", errors.New("hack/tools/helm/go.mod requires no helm.sh/helm/v3")
	}
	return string(m[1]), nil
}

// helm runs helm in the repository's root and returns its standard output and error.
func helm(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.Command(helmBin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = repoRoot, &out, &errOut
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+helmHome, "HELM_CACHE_HOME="+helmHome, "HELM_DATA_HOME="+helmHome)
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// manifest is one object of helm template's output.
type manifest struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	raw []byte
}

func (m manifest) String() string {
	return fmt.Sprintf("%s %s/%s", m.Kind, m.Metadata.Namespace, m.Metadata.Name)
}

type manifests []manifest

// render runs helm template on the chart with args (--set, -f ...) and fails the test if it fails.
func render(t *testing.T, args ...string) manifests {
	t.Helper()
	return renderChart(t, chartDir, args...)
}

func renderChart(t *testing.T, chart string, args ...string) manifests {
	t.Helper()
	out, errOut, err := helm(append([]string{"template", release, chart, "--namespace", namespace}, args...)...)
	if err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	ms, err := splitManifests(out)
	if err != nil {
		t.Fatalf("helm template %s: %v", strings.Join(args, " "), err)
	}
	return ms
}

// renderFails runs helm template, which must fail, and returns its error output.
func renderFails(t *testing.T, args ...string) string {
	t.Helper()
	_, errOut, err := helm(append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
	if err == nil {
		t.Fatalf("helm template %s succeeded, want a failure", strings.Join(args, " "))
	}
	return errOut
}

func splitManifests(out string) (manifests, error) {
	var ms manifests
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(out)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return ms, nil
		}
		if err != nil {
			return nil, err
		}
		var m manifest
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("decoding %q: %w", doc, err)
		}
		if m.Kind == "" { // only comments
			continue
		}
		m.raw = doc
		ms = append(ms, m)
	}
}

func (ms manifests) ofKind(kind string) manifests {
	var out manifests
	for _, m := range ms {
		if m.Kind == kind {
			out = append(out, m)
		}
	}
	return out
}

// named returns the object of that kind and name; it fails the test when there is none.
func (ms manifests) named(t *testing.T, kind, name string) manifest {
	t.Helper()
	for _, m := range ms.ofKind(kind) {
		if m.Metadata.Name == name {
			return m
		}
	}
	t.Fatalf("no %s %q among %v", kind, name, ms)
	return manifest{}
}

// only returns the one object of that kind; it fails the test when there are none or several.
func (ms manifests) only(t *testing.T, kind string) manifest {
	t.Helper()
	of := ms.ofKind(kind)
	if len(of) != 1 {
		t.Fatalf("%d objects of kind %s, want 1: %v", len(of), kind, of)
	}
	return of[0]
}

// kinds counts the objects of each kind.
func (ms manifests) kinds() map[string]int {
	n := map[string]int{}
	for _, m := range ms {
		n[m.Kind]++
	}
	return n
}

// decode decodes a rendered object into T, refusing any field T does not have: a misspelt or
// misplaced field in a template fails the test instead of being dropped by the API server.
func decode[T any](t *testing.T, m manifest) *T {
	t.Helper()
	var obj T
	if err := yaml.UnmarshalStrict(m.raw, &obj); err != nil {
		t.Fatalf("decoding %v: %v\n%s", m, err, m.raw)
	}
	return &obj
}

// readRepoYAML decodes a YAML file of the repository into T.
func readRepoYAML[T any](t *testing.T, path string) *T {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		t.Fatal(err)
	}
	var obj T
	if err := yaml.UnmarshalStrict(data, &obj); err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return &obj
}

// valuesFile writes a values file for -f and returns its path.
func valuesFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// toYAML shows an object in a failure message.
func toYAML(v any) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%+v", v)
	}
	return string(data)
}
