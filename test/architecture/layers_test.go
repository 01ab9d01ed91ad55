// Package architecture checks the import graph against the layers of docs/architecture.md: a
// package imports only packages of the layers below it, the share-state model and the Kafka wire
// package link nothing of Kubernetes, and nothing that ships imports the test tooling.
package architecture

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sharestate/sharestate-operator/"

// layers lists, lowest first, the module's packages by path prefix (relative to the module). A
// package may import module packages of lower layers only; packages of one layer do not import each
// other. Test files are not checked: a test may use anything.
var layers = [][]string{
	{"api/v1alpha1"},
	{"pkg/sharestate"},
	{"pkg/sharestate/internal/fanout", "pkg/sharestate/kafkawire", "internal/metricsreg"},
	{"pkg/sharestate/kafkawire/serve", "pkg/sharestate/leader"},
	{"pkg/sharestate/persister"},
	{"internal/prommetrics", "controllers/partitionbook"},
	{"controllers", "internal/metricsauth", "internal/kubeconfig"},
	{"internal/operator", "internal/sidecar", "internal/plugin"},
	{"cmd/", "hack/", "test/"},
}

// withoutKubernetes are the packages that must not link client-go, apimachinery, controller-runtime
// or Prometheus, not even indirectly: a user of the model, of the wire protocol or of its server
// gets none of them. The metrics are the binaries' (internal/prommetrics).
var withoutKubernetes = []string{"pkg/sharestate", "pkg/sharestate/kafkawire", "pkg/sharestate/kafkawire/serve", "pkg/sharestate/leader"}

// codecOnly is the wire codec and client: it links the model, franz-go's kmsg and the standard
// library, and not the server, the proxy or a logger.
const codecOnly = "pkg/sharestate/kafkawire"

type goPackage struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps=false", "-json=ImportPath,Imports,Deps", "-tags", "e2e", "../../...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages: the check would check nothing", len(pkgs))
	}
	return pkgs
}

// layerOf returns a module package's layer, by its longest matching prefix; -1 for one no layer names.
func layerOf(rel string) int {
	best, bestLen := -1, -1
	for i, layer := range layers {
		for _, prefix := range layer {
			if (rel == strings.TrimSuffix(prefix, "/") || strings.HasPrefix(rel, strings.TrimSuffix(prefix, "/")+"/")) && len(prefix) > bestLen {
				best, bestLen = i, len(prefix)
			}
		}
	}
	return best
}

func TestImportsRunDownTheLayers(t *testing.T) {
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module)
		from := layerOf(rel)
		if from < 0 {
			t.Errorf("package %s is in no layer of docs/architecture.md: add it to the picture and to layers", rel)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			to := layerOf(strings.TrimPrefix(imp, module))
			if to >= from && from != len(layers)-1 {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports must run down the layers", rel, from, strings.TrimPrefix(imp, module), to)
			}
			if strings.HasPrefix(strings.TrimPrefix(imp, module), "test/") && !strings.HasPrefix(rel, "test/") && !strings.HasPrefix(rel, "hack/") {
				t.Errorf("%s ships and imports the test tooling %s", rel, imp)
			}
		}
	}
}

func TestModelAndWireLinkNoKubernetes(t *testing.T) {
	for _, rel := range withoutKubernetes {
		out, err := exec.Command("go", "list", "-deps", "../../"+rel).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", rel, err)
		}
		deps := strings.Fields(string(out))
		if len(deps) < 5 {
			t.Fatalf("go list -deps %s printed %d packages: the check would check nothing", rel, len(deps))
		}
		for _, dep := range deps {
			if strings.HasPrefix(dep, "k8s.io/") || strings.HasPrefix(dep, "sigs.k8s.io/") || strings.Contains(dep, "prometheus") {
				t.Errorf("%s links %s", rel, dep)
			}
		}
	}
}

// The public library imports nothing private of the module (internal/) and none of the test tooling:
// a user's go get of pkg/... pulls neither.
func TestLibraryStandsAlone(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../pkg/...").Output()
	if err != nil {
		t.Fatalf("go list -deps ./pkg/...: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps ./pkg/... printed %d packages: the check would check nothing", len(deps))
	}
	for _, dep := range deps {
		rel, ours := strings.CutPrefix(dep, module)
		switch {
		case ours && (strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "test/") || strings.HasPrefix(rel, "hack/")):
			t.Errorf("the library links %s", rel)
		case strings.Contains(dep, "porcupine") || strings.Contains(dep, "kfake"):
			t.Errorf("the library links the test dependency %s", dep)
		}
	}
}

// The wire codec and client link the model, kmsg and the standard library only.
func TestCodecLinksOnlyKmsg(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../"+codecOnly).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", codecOnly, err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if !strings.Contains(strings.Split(dep, "/")[0], ".") { // the standard library
			continue
		}
		switch dep {
		case module + "pkg/sharestate", module + codecOnly,
			"github.com/twmb/franz-go/pkg/kmsg", "github.com/twmb/franz-go/pkg/kmsg/internal/kbin", "github.com/twmb/franz-go/pkg/kbin":
		default:
			t.Errorf("%s links %s", codecOnly, dep)
		}
	}
}
