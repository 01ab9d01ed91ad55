//go:build e2e

package e2e

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestBrokerStatefulSetRunsUnderTheInstalledServiceAccount: the broker StatefulSet of
// docs/kafka-integration.md runs its pods under the ServiceAccount it creates, in a namespace where
// the install commands of the README and the chart's README bind the sidecar's Role to that account.
// (It named another account than the install command, so its sidecars would have had no access.)
// The docs test applies the manifest; this reads it, and needs no cluster.
func TestBrokerStatefulSetRunsUnderTheInstalledServiceAccount(t *testing.T) {
	root := testenv.RepoRoot()
	var account corev1.ServiceAccount
	var brokers appsv1.StatefulSet
	for _, doc := range strings.Split(docBlock(t, filepath.Join(root, "docs", "kafka-integration.md"), "broker-statefulset"), "\n---\n") {
		var kind struct{ Kind string }
		if err := yaml.Unmarshal([]byte(doc), &kind); err != nil {
			t.Fatal(err)
		}
		var err error
		switch kind.Kind {
		case "ServiceAccount":
			err = yaml.Unmarshal([]byte(doc), &account)
		case "StatefulSet":
			err = yaml.Unmarshal([]byte(doc), &brokers)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	podAccount := brokers.Spec.Template.Spec.ServiceAccountName
	if podAccount == "" || podAccount != account.Name || brokers.Namespace != account.Namespace {
		t.Fatalf("the StatefulSet %s/%s runs under ServiceAccount %q, the manifest creates %s/%s",
			brokers.Namespace, brokers.Name, podAccount, account.Namespace, account.Name)
	}

	accountFlag := regexp.MustCompile(`--set '?sidecar\.serviceAccountName=([^'\s]+)`)
	namespacesFlag := regexp.MustCompile(`--set '?sidecar\.rbac\.namespaces=\{([^}]*)\}`)
	for _, install := range []struct{ page, block string }{
		{filepath.Join(root, "README.md"), "helm-install"},
		{filepath.Join(root, "charts", "sharestate-operator", "README.md"), "install"},
	} {
		command := docBlock(t, install.page, install.block)
		if m := accountFlag.FindStringSubmatch(command); m == nil || m[1] != podAccount {
			t.Errorf("%s, block %s: sidecar.serviceAccountName %v, want the brokers' account %q", install.page, install.block, m, podAccount)
		}
		if m := namespacesFlag.FindStringSubmatch(command); m == nil || !slices.Contains(strings.Split(m[1], ","), brokers.Namespace) {
			t.Errorf("%s, block %s: sidecar.rbac.namespaces %v, want the brokers' namespace %q among them", install.page, install.block, m, brokers.Namespace)
		}
	}
}
