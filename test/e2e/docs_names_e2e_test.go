//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestReadmeNamesObjectsAsTheyAreNamed: the README's SharePartitionState name of the sample group's
// partition 0 is the one the persister gives it, and the ShareGroup of the sample is the name its
// manifest gives, not one of the persister's (the README showed `<group prefix>-<hash>` where a
// reader of the Quickstart saw `orders`).
func TestReadmeNamesObjectsAsTheyAreNamed(t *testing.T) {
	root := testenv.RepoRoot()
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "sharestate_v1alpha1_sharegroup.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sample sharestatev1.ShareGroup
	if err := yaml.Unmarshal(data, &sample); err != nil {
		t.Fatal(err)
	}
	if len(sample.Spec.Topics) == 0 {
		t.Fatal("the sample group declares no topic")
	}
	groupID, topicID := string(sample.Spec.GroupID), string(sample.Spec.Topics[0].TopicID)
	if sample.Name != sampleGroupName || groupID != sampleGroupID || topicID != sampleTopicID {
		t.Fatalf("the sample group is %s (group id %s, topics %+v), want the one the docs test expects", sample.Name, sample.Spec.GroupID, sample.Spec.Topics)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(readme)), " ") // as it reads, whatever the line breaks
	partition0 := sharestatev1.SharePartitionStateName(groupID, topicID, 0)
	for _, want := range []string{
		"Partition 0 of the sample group (group id `" + groupID + "`) is `" + partition0 + "`",
		"A ShareGroup you create takes any name (the sample's is `" + sample.Name + "`)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the README does not say %q", want)
		}
	}
}
