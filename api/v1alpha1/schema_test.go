package v1alpha1_test

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The schema bounds a stored batch's length and shape and nothing more: the grammar is the codec's
// alone (sharestate.ParseBatch), so there is no rule per batch, and the pattern is short enough to read
// in a refusal and matches every batch the codec writes. (That the API server accepts every batch the
// codec parses is TestStateBatchSchemaAcceptsEveryBatchTheCodecParses.)
func TestStateBatchSchemaBoundsOnlyTheShape(t *testing.T) {
	const longest = "9223372036854775806-9223372036854775807/4/32767"
	crd := readCRD(t, "sharestate.dev_sharepartitionstates.yaml")
	items := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["stateBatches"].Items.Schema
	if len(items.XValidations) != 0 {
		t.Errorf("CRD rules %+v on a batch: the grammar is the codec's", items.XValidations)
	}
	if items.MaxLength == nil || *items.MaxLength != int64(len(longest)) {
		t.Errorf("CRD maxLength %v, want %d, the longest batch's", items.MaxLength, len(longest))
	}
	if len(items.Pattern) > 64 {
		t.Errorf("CRD pattern %q: %d characters, a refusal quotes it whole", items.Pattern, len(items.Pattern))
	}
	shape := regexp.MustCompile(items.Pattern)
	r := rand.New(rand.NewPCG(7, 11))
	edges := []int64{0, 1, 9, 10, math.MaxInt64 - 1, math.MaxInt64}
	for range 20000 {
		first := edges[r.IntN(len(edges))]
		if r.IntN(2) == 0 {
			first = r.Int64()
		}
		last := first + int64(r.Uint64N(uint64(math.MaxInt64-first)+1))
		states := []sharestate.DeliveryState{0, 2, 3, 4}
		b := sharestate.FormatBatch(sharestate.StateBatch{FirstOffset: first, LastOffset: last,
			DeliveryState: states[r.IntN(len(states))], DeliveryCount: int16(r.IntN(math.MaxInt16 + 1))})
		if !shape.MatchString(b) {
			t.Fatalf("the codec's batch %q does not match the CRD pattern %q", b, items.Pattern)
		}
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
