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
