package v1alpha1_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The samples (kubectl apply -k config/samples) must be what the persister would create: a
// SharePartitionState under another name than its key's is one the persister never reads, a second
// state for the same partition.
func TestSamplesUseDerivedNames(t *testing.T) {
	dir := filepath.Join(testenv.RepoRoot(), "config", "samples")
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &kustomization)
	states := 0
	for _, file := range kustomization.Resources {
		var head struct {
			Kind string `json:"kind"`
		}
		readYAML(t, filepath.Join(dir, file), &head)
		if head.Kind != "SharePartitionState" {
			continue
		}
		var sps sharestatev1.SharePartitionState
		readYAML(t, filepath.Join(dir, file), &sps)
		states++
		want := sharestatev1.SharePartitionStateName(string(sps.Spec.GroupID), string(sps.Spec.TopicID), sps.Spec.Partition)
		if sps.Name != want {
			t.Errorf("%s: SharePartitionState %q, but its key's name is %q", file, sps.Name, want)
		}
	}
	if states == 0 {
		t.Fatal("no SharePartitionState sample found: the test checks nothing")
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("\n---")) {
		t.Fatalf("%s holds several documents; the test reads one per file", path)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
