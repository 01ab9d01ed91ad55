package plugin_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// listed is the part of a kind List of objects the tests read, from -o json or -o yaml.
type listed struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"metadata"`
		Spec struct {
			GroupID   string `json:"groupId"`
			Partition *int32 `json:"partition"`
		} `json:"spec"`
	} `json:"items"`
}

// itemKinds lists a List's items as "Kind namespace/name".
func (l listed) itemKinds() []string {
	out := make([]string, len(l.Items))
	for i, it := range l.Items {
		out[i] = fmt.Sprintf("%s %s/%s", it.Kind, it.Metadata.Namespace, it.Metadata.Name)
	}
	return out
}

func parseList(t *testing.T, format, out string) listed {
	t.Helper()
	var l listed
	unmarshal := func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
	if format == "json" {
		unmarshal = json.Unmarshal // strict JSON: yaml would accept it too
	}
	if err := unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("-o %s: %v\n%s", format, err, out)
	}
	if l.APIVersion != "v1" || l.Kind != "List" {
		t.Fatalf("-o %s: apiVersion %q, kind %q; want a v1 List", format, l.APIVersion, l.Kind)
	}
	return l
}

// waitState waits until the operator has set the group's Ready condition with the given reason.
func waitState(t *testing.T, sg *sharestatev1.ShareGroup, reason string) {
	t.Helper()
	testenv.Eventually(t, 15*time.Second, func() error {
		c := meta.FindStatusCondition(getGroup(t, sg).Status.Conditions, sharestatev1.ConditionReady)
		if c == nil || c.Reason != reason {
			return fmt.Errorf("group %s: Ready condition %+v, want reason %s", sg.Name, c, reason)
		}
		return nil
	})
}

// list shows the groups of a namespace, or of all with -A, with their state, in kubectl's formats.
func TestList(t *testing.T) {
	requireEnv(t)
	ns1, ns2 := env.Namespace(t), env.Namespace(t)
	ready := declareGroup(t, ns1, "list-ready", 1)
	newBroker(t, ns1, "list-ready", 1, nil).initialize(0, 0, 0)
	empty := declareGroup(t, ns2, "list-empty", 2)
	waitState(t, ready, sharestatev1.ReasonAllPartitionsReady)
	waitState(t, empty, sharestatev1.ReasonNoPartitions)

	out := mustRun(t, "list", "-n", ns1)
	lineMatching(t, out, `^NAME\s+GROUP ID\s+STATE\s+PARTITIONS\s+FENCED\s+STATE EPOCH\s+AGE$`)
	lineMatching(t, out, `^`+ready.Name+`\s+list-ready\s+Ready\s+1\s+0\s+0\s+\S+$`)
	if strings.Contains(out, empty.Name) {
		t.Fatalf("list -n %s shows a group of %s:\n%s", ns1, ns2, out)
	}

	out = mustRun(t, "list", "-A")
	lineMatching(t, out, `^NAMESPACE\s+NAME\s+GROUP ID\s+STATE\s+`)
	lineMatching(t, out, `^`+ns1+`\s+`+ready.Name+`\s+list-ready\s+Ready\s+`)
	lineMatching(t, out, `^`+ns2+`\s+`+empty.Name+`\s+list-empty\s+NoPartitions\s+`)

	for _, format := range []string{"json", "yaml"} {
		l := parseList(t, format, mustRun(t, "list", "-n", ns2, "-o", format))
		if got := l.itemKinds(); len(got) != 1 || got[0] != "ShareGroup "+ns2+"/"+empty.Name || l.Items[0].APIVersion != "sharestate.dev/v1alpha1" {
			t.Fatalf("list -o %s: items %v (apiVersion %q)", format, got, l.Items[0].APIVersion)
		}
	}
	if out := mustRun(t, "list", "-n", ns1, "-o", "jsonpath={.items[*].spec.groupId}"); out != "list-ready" {
		t.Fatalf("list -o jsonpath: %q", out)
	}
	out = mustRun(t, "list", "-A", "-o", `custom-columns=NS:.metadata.namespace,GROUP:.spec.groupId,READY:.status.conditions[?(@.type=="Ready")].reason,NOPE:.spec.nope`)
	lineMatching(t, out, `^NS\s+GROUP\s+READY\s+NOPE$`)
	lineMatching(t, out, `^`+ns1+`\s+list-ready\s+AllPartitionsReady\s+<none>$`)
	lineMatching(t, out, `^`+ns2+`\s+list-empty\s+NoPartitions\s+<none>$`)
	if out := mustRun(t, "list", "-n", ns2, "-o", "name"); out != "sharegroup.sharestate.dev/"+empty.Name+"\n" {
		t.Fatalf("list -o name: %q", out)
	}

	r := kubectlSharestate(t, "", "list", "-n", env.Namespace(t))
	if r.err != nil || r.out != "" || !strings.HasPrefix(r.errOut, "No share groups found in namespace ") {
		t.Fatalf("list of an empty namespace: out %q, errOut %q, error %v", r.out, r.errOut, r.err)
	}
	mustFail(t, "", `--output "xml": want one of wide, json, yaml`, "list", "-o", "xml")
	mustFail(t, "", `custom-columns: "GROUP" is not NAME:JSONPATH`, "list", "-o", "custom-columns=GROUP")
}
