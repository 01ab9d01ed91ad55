package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The schema's pattern for a stored batch and the codec's must be one and the same, or the API server
// would accept batches the persister reports as corrupt (or refuse ones it writes).
func TestStateBatchSchemaPatternIsTheCodecs(t *testing.T) {
	path := filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "sharestate.dev_sharepartitionstates.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	items := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["stateBatches"].Items.Schema
	if items.Pattern != sharestate.BatchPattern {
		t.Errorf("CRD pattern %q, codec pattern %q", items.Pattern, sharestate.BatchPattern)
	}
	if items.MaxLength == nil || *items.MaxLength < int64(len("9223372036854775807-9223372036854775807/4/32767")) {
		t.Errorf("CRD maxLength %v is below the longest valid batch", items.MaxLength)
	}
}

// kubectl get shows what an operator needs: the group id by default and, with -o wide, why a group is
// not Ready; whether a partition is fenced and which broker leads it.
func TestPrinterColumns(t *testing.T) {
	want := map[string]map[string]struct {
		jsonPath string
		priority int32
	}{
		"sharestate.dev_sharegroups.yaml": {
			"Group":   {".spec.groupId", 0},
			"Message": {`.status.conditions[?(@.type=="Ready")].message`, 1},
		},
		"sharestate.dev_sharepartitionstates.yaml": {
			"Fenced": {`.status.conditions[?(@.type=="Fenced")].status`, 0},
			"Leader": {".status.leader.podName", 0},
			"Broker": {".status.leader.brokerId", 0},
		},
	}
	for file, columns := range want {
		raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", file))
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		got := map[string]apiextensionsv1.CustomResourceColumnDefinition{}
		for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
			got[c.Name] = c
		}
		for name, w := range columns {
			c, ok := got[name]
			if !ok || c.JSONPath != w.jsonPath || c.Priority != w.priority {
				t.Errorf("%s: column %s is %+v, want %s at priority %d", file, name, c, w.jsonPath, w.priority)
			}
		}
	}
}
