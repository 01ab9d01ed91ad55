package bench

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The baseline is the generated CRD without a single rule, and nothing else changed that the API
// server validates.
func TestBaselineCRDHasNoRules(t *testing.T) {
	crd, err := baselineCRD()
	if err != nil {
		t.Fatal(err)
	}
	if crd.Spec.Group != baselineGroup || !strings.HasSuffix(crd.Name, "."+baselineGroup) {
		t.Errorf("group %q, name %q: want the baseline's group", crd.Spec.Group, crd.Name)
	}
	schema := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	if n := countRules(schema); n != 0 {
		t.Errorf("%d rules left in the baseline", n)
	}
	stateBatches := schema.Properties["status"].Properties["stateBatches"]
	// A batch's format is a CEL rule (the baseline drops it); its length bound is not.
	if stateBatches.Items.Schema.MaxLength == nil || stateBatches.MaxItems == nil {
		t.Error("the baseline lost the schema's bounds, not only its rules")
	}
}

func countRules(s *apiextensionsv1.JSONSchemaProps) int {
	n := len(s.XValidations)
	for _, p := range s.Properties {
		n += countRules(&p)
	}
	if s.Items != nil && s.Items.Schema != nil {
		n += countRules(s.Items.Schema)
	}
	return n
}

func TestValidationCostLine(t *testing.T) {
	v := validationCost{writes: 1000, allocKB: 650, baselineAllocKB: 520, cpuMS: 4.5, baselineCPUMS: 4.1}
	want := "scenario=validation-cost writes=1000 apiserver_alloc_kb_per_write=650.0 baseline_alloc_kb_per_write=520.0 rules_alloc_share=0.200 apiserver_cpu_ms_per_write=4.500 baseline_cpu_ms_per_write=4.100"
	if got := v.Line(); got != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
}
