package plugin_test

import (
	"encoding/json"
	"runtime"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/sharestate/sharestate-operator/internal/plugin"
)

// versionDoc is the part of version's -o json and -o yaml the tests read.
type versionDoc struct {
	Plugin struct {
		Version    string `json:"version"`
		Module     string `json:"module"`
		APIVersion string `json:"apiVersion"`
		GoVersion  string `json:"goVersion"`
		Platform   string `json:"platform"`
	} `json:"plugin"`
	Server *struct {
		CRDs []struct {
			Name      string   `json:"name"`
			Installed bool     `json:"installed"`
			Served    []string `json:"served"`
			Storage   string   `json:"storage"`
			Generator string   `json:"generator"`
		} `json:"crds"`
	} `json:"server"`
}

func TestVersion(t *testing.T) {
	requireEnv(t)
	out := mustRun(t, "version")
	lineMatching(t, out, `^Plugin Version:\s+\S+`)
	lineMatching(t, out, `^Go:\s+`+regexpQuote(runtime.Version())+` `+runtime.GOOS+`/`+runtime.GOARCH+`$`)
	lineMatching(t, out, `^Speaks:\s+sharestate\.dev/v1alpha1$`)
	lineMatching(t, out, `^\s+sharegroups\.sharestate\.dev\s+v1alpha1\s+v1alpha1\s+v\d+\.\d+\.\d+$`)
	lineMatching(t, out, `^\s+sharepartitionstates\.sharestate\.dev\s+v1alpha1\s+v1alpha1\s+`)
	if strings.Contains(out, "Warning") {
		t.Fatalf("version warns against the CRDs of this tree:\n%s", out)
	}

	for _, format := range []string{"json", "yaml"} {
		out := mustRun(t, "version", "-o", format)
		var v versionDoc
		unmarshal := func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
		if format == "json" {
			unmarshal = json.Unmarshal
		}
		if err := unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("version -o %s: %v", format, err)
		}
		if v.Plugin.GoVersion != runtime.Version() || v.Plugin.APIVersion != "sharestate.dev/v1alpha1" || v.Plugin.Module == "" ||
			v.Server == nil || len(v.Server.CRDs) != 2 {
			t.Fatalf("version -o %s: %+v", format, v)
		}
		for _, c := range v.Server.CRDs {
			if !c.Installed || !slices.Equal(c.Served, []string{"v1alpha1"}) || c.Storage != "v1alpha1" || c.Generator == "" {
				t.Fatalf("version -o %s: CRD %+v", format, c)
			}
		}
	}

	// --client does not contact the cluster: it works with a kubeconfig that points nowhere.
	r := kubectlSharestateWith(t, "/nonexistent/kubeconfig", "version", "--client", "-o", "json")
	var v versionDoc
	if r.err != nil || json.Unmarshal([]byte(r.out), &v) != nil || v.Server != nil || v.Plugin.GoVersion != runtime.Version() {
		t.Fatalf("version --client: %q, %v", r.out, r.err)
	}
	mustFail(t, "", `--output "name": want json or yaml`, "version", "-o", "name")
}

func regexpQuote(s string) string {
	return strings.NewReplacer(".", `\.`, "+", `\+`).Replace(s)
}

// An error is one line, printed once by the caller: no usage text, no cobra "Error:" line.
func TestErrorsAreOneLine(t *testing.T) {
	requireEnv(t)
	for _, tc := range []struct {
		want string
		args []string
	}{
		{"unknown flag: --nope", []string{"list", "--nope"}},
		{`unknown command "lsit" for "kubectl sharestate"; did you mean "list"?`, []string{"lsit"}},
		{"accepts 1 arg(s), received 0", []string{"reset-offsets"}},
		{"takes one of --dry-run", []string{"reset-offsets", "orders", "--topic", "orders", "--to-earliest"}},
	} {
		r := mustFail(t, "", "", tc.args...)
		if line := plugin.ErrorLine(r.err); !strings.Contains(line, tc.want) || strings.Contains(line, "\n") {
			t.Errorf("kubectl sharestate %s: error line %q, want one line containing %q", strings.Join(tc.args, " "), line, tc.want)
		}
		if r.out != "" || r.errOut != "" {
			t.Errorf("kubectl sharestate %s printed besides its error: out %q, errOut %q", strings.Join(tc.args, " "), r.out, r.errOut)
		}
	}
}
