package chart_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const schemaError = "values don't meet the specifications of the schema"

func TestSchemaRejectsInvalidValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		// wantInError names the offending value in helm's error.
		wantInError string
	}{
		{"negative replicas", []string{"--set", "replicas=-1"}, "'/replicas'"},
		{"too many replicas", []string{"--set", "replicas=11"}, "'/replicas'"},
		{"replicas not a number", []string{"--set-string", "replicas=two"}, "'/replicas'"},
		{"unknown log level", []string{"--set", "logging.level=verbose"}, "'/logging/level'"},
		{"verbosity 0", []string{"--set", "logging.level=0"}, "'/logging/level'"},
		{"unknown log format", []string{"--set", "logging.format=text"}, "'/logging/format'"},
		{"unknown pull policy", []string{"--set", "image.pullPolicy=Sometimes"}, "'/image/pullPolicy'"},
		{"digest not a digest", []string{"--set", "image.digest=latest"}, "'/image/digest'"},
		{"unknown value", []string{"--set", "replica=2"}, "additional properties 'replica' not allowed"},
		{"unknown nested value", []string{"--set", "sidecar.rbac.namespace=kafka"}, "additional properties 'namespace' not allowed"},
		{"invalid namespace", []string{"--set", "watchNamespaces={Kafka_A}"}, "'/watchNamespaces/0'"},
		{"repeated namespace", []string{"--set", "watchNamespaces={kafka,kafka}"}, "'/watchNamespaces'"},
		{"repeated sidecar namespace", []string{"--set", "sidecar.rbac.namespaces={kafka,kafka}"}, "'/sidecar/rbac/namespaces'"},
		{"duration not a duration", []string{"--set", "fenceNotReadyAfter=2 minutes"}, "'/fenceNotReadyAfter'"},
		{"no workers", []string{"--set", "maxConcurrentReconciles=0"}, "'/maxConcurrentReconciles'"},
		{"port out of range", []string{"--set", "metrics.service.port=70000"}, "'/metrics/service/port'"},
		{"unknown service type", []string{"--set", "metrics.service.type=ExternalName"}, "'/metrics/service/type'"},
		{"scrape interval", []string{"--set", "metrics.serviceMonitor.interval=soon"}, "'/metrics/serviceMonitor/interval'"},
		{"negative broker id", []string{"--set", "sidecar.example.brokerId=-1"}, "'/sidecar/example/brokerId'"},
		{"sidecar port 0", []string{"--set", "sidecar.healthPort=0"}, "'/sidecar/healthPort'"},
		{"switch not a bool", []string{"--set-string", "crds.install=yes"}, "'/crds/install'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errOut := renderFails(t, tc.args...)
			if !strings.Contains(errOut, schemaError) || !strings.Contains(errOut, tc.wantInError) {
				t.Errorf("helm template %s failed with\n%s\nwant a schema error naming %s", strings.Join(tc.args, " "), errOut, tc.wantInError)
			}
		})
	}
}

// TestTemplatesRejectInvalidValues covers what the schema cannot say, which the templates check.
func TestTemplatesRejectInvalidValues(t *testing.T) {
	for _, tc := range []struct {
		name, wantInError string
		args              []string
	}{
		{
			name:        "sidecar ports collide",
			args:        []string{"--set", "sidecar.example.enabled=true", "--set", "sidecar.healthPort=9100", "--set", "sidecar.metricsPort=9100"},
			wantInError: "sidecar.listenPort, sidecar.healthPort and sidecar.metricsPort must differ",
		},
		{
			name:        "sidecar RBAC without a service account",
			args:        []string{"--set", "sidecar.rbac.namespaces={kafka}"},
			wantInError: "sidecar.serviceAccountName is required",
		},
		{
			name:        "no service account to run as",
			args:        []string{"--set", "serviceAccount.create=false"},
			wantInError: "serviceAccount.name is required",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if errOut := renderFails(t, tc.args...); !strings.Contains(errOut, tc.wantInError) {
				t.Errorf("helm template %s failed with\n%s\nwant %q", strings.Join(tc.args, " "), errOut, tc.wantInError)
			}
		})
	}
}

// TestValuesDocumented checks that values.yaml, values.schema.json and the README's values table
// name the same values: the schema describes every value, and the README documents every one.
func TestValuesDocumented(t *testing.T) {
	chart := filepath.Join(repoRoot, chartDir)
	var schema map[string]any
	data, err := os.ReadFile(filepath.Join(chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	if schema["$schema"] != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("values.schema.json: $schema = %v, want draft-07", schema["$schema"])
	}
	leaves := map[string]bool{}
	schemaLeaves(t, schema, schema, "", leaves)
	delete(leaves, "global") // a parent chart's, which Helm adds to a subchart's values

	var values map[string]any
	if data, err = os.ReadFile(filepath.Join(chart, "values.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	inValues := map[string]bool{}
	valueLeaves(values, "", leaves, inValues)

	readme, err := os.ReadFile(filepath.Join(chart, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllSubmatch(readme, -1) {
		documented[string(m[1])] = true
	}

	for _, key := range sortedKeys(inValues) {
		if !leaves[key] {
			t.Errorf("values.yaml's %s is not in values.schema.json", key)
		}
	}
	for _, key := range sortedKeys(leaves) {
		if !inValues[key] {
			t.Errorf("values.schema.json's %s has no default in values.yaml", key)
		}
		if !documented[key] {
			t.Errorf("%s is not in README.md's values table", key)
		}
	}
	for _, key := range sortedKeys(documented) {
		if !leaves[key] {
			t.Errorf("README.md documents %s, which is not a value of the schema", key)
		}
	}
}

// schemaLeaves collects the dotted paths of the schema's values: it descends into the objects whose
// properties the chart defines (additionalProperties: false) and stops at any other value.
func schemaLeaves(t *testing.T, root, node map[string]any, path string, leaves map[string]bool) {
	t.Helper()
	if ref, ok := node["$ref"].(string); ok {
		def, ok := root["definitions"].(map[string]any)[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		if !ok {
			t.Fatalf("values.schema.json: %s: unresolved $ref %s", path, ref)
		}
		node = def
	}
	props, ok := node["properties"].(map[string]any)
	if !ok || node["additionalProperties"] != false {
		leaves[path] = true
		return
	}
	for name, prop := range props {
		schemaLeaves(t, root, prop.(map[string]any), strings.TrimPrefix(path+"."+name, "."), leaves)
	}
}

// valueLeaves collects the dotted paths of values: the schema's leaves, or whatever is not a map.
func valueLeaves(v any, path string, schemaLeaves, out map[string]bool) {
	m, isMap := v.(map[string]any)
	if !isMap || schemaLeaves[path] {
		out[path] = true
		return
	}
	for k, child := range m {
		valueLeaves(child, strings.TrimPrefix(path+"."+k, "."), schemaLeaves, out)
	}
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestLint(t *testing.T) {
	for name, args := range map[string][]string{
		"defaults": nil,
		"everything on": {
			"--set", "sidecar.example.enabled=true", "--set", "metrics.serviceMonitor.enabled=true",
			"--set", "sidecar.rbac.namespaces={kafka}", "--set", "sidecar.serviceAccountName=kafka-broker",
			"--set", "watchNamespaces={kafka}",
		},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, err := helm(append([]string{"lint", "--strict", chartDir}, args...)...)
			if err != nil || !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") ||
				strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Errorf("helm lint --strict: %v\n%s%s", err, out, errOut)
			}
		})
	}
}

// TestChartCopiesInSync checks the chart's copies of the CRDs and RBAC rules against config/.
func TestChartCopiesInSync(t *testing.T) {
	cmd := exec.Command(filepath.Join(repoRoot, "hack", "sync-chart-crds.sh"), "--check")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("hack/sync-chart-crds.sh --check: %v\n%s", err, out)
	}
}
