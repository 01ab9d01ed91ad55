package v1alpha1_test

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The schema checks a stored batch with a CEL rule that says what is wrong, not with a pattern, which
// the API server would quote whole in every refusal. (That it accepts what the codec parses, and only
// that, is TestStateBatchSchemaAcceptsWhatTheCodecParses.)
func TestStateBatchSchemaHasNoPattern(t *testing.T) {
	crd := readCRD(t, "sharestate.dev_sharepartitionstates.yaml")
	items := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["stateBatches"].Items.Schema
	if items.Pattern != "" {
		t.Errorf("CRD pattern %q: a refusal would quote it whole", items.Pattern)
	}
	if len(items.XValidations) != 1 || items.XValidations[0].MessageExpression == "" {
		t.Errorf("CRD rules %+v, want one with a messageExpression", items.XValidations)
	}
	if items.MaxLength == nil || *items.MaxLength < int64(len("9223372036854775807-9223372036854775807/4/32767")) {
		t.Errorf("CRD maxLength %v is below the longest valid batch", items.MaxLength)
	}
}

// One bound for partitions: a declared topic has at most MaxPartitions, so no partition index, of a
// SharePartitionState or of a reset, reaches it.
func TestPartitionBoundsAreMaxPartitions(t *testing.T) {
	groups := readCRD(t, "sharestate.dev_sharegroups.yaml").Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	states := readCRD(t, "sharestate.dev_sharepartitionstates.yaml").Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	for _, c := range []struct {
		what   string
		schema apiextensionsv1.JSONSchemaProps
		want   float64
	}{
		{"ShareGroup spec.topics[].partitions", groups.Properties["topics"].Items.Schema.Properties["partitions"], sharestatev1.MaxPartitions},
		{"ShareGroup spec.offsetReset.topics[].partitions[]",
			*groups.Properties["offsetReset"].Properties["topics"].Items.Schema.Properties["partitions"].Items.Schema, sharestatev1.MaxPartitions - 1},
		{"SharePartitionState spec.partition", states.Properties["partition"], sharestatev1.MaxPartitions - 1},
	} {
		if c.schema.Maximum == nil || *c.schema.Maximum != c.want {
			t.Errorf("%s: maximum %v, want %v", c.what, c.schema.Maximum, c.want)
		}
	}
}

func readCRD(t *testing.T, file string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", file))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd
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
