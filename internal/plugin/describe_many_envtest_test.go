package plugin_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// describe takes several groups by name, or every group of the namespace (--all) or of every
// namespace (-A); -o prints each group followed by its SharePartitionStates.
func TestDescribeSeveralGroups(t *testing.T) {
	requireEnv(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	alpha := declareGroup(t, ns, "many-alpha", 2)
	beta := declareGroup(t, ns, "many-beta", 1)
	gamma := declareGroup(t, other, "many-gamma", 1)
	b := newBroker(t, ns, "many-alpha", 1, nil)
	b.initialize(0, 0, 0)
	b.initialize(1, 0, 0)
	spsAlpha0 := sharestatev1.SharePartitionStateName("many-alpha", topicOrders, 0)
	spsAlpha1 := sharestatev1.SharePartitionStateName("many-alpha", topicOrders, 1)

	// By object name and by group id, the same group named twice described once.
	out := mustRun(t, "describe", "group", alpha.Name, "many-beta", "many-alpha", "-n", ns)
	if got := describedGroups(out); !slices.Equal(got, []string{alpha.Name, beta.Name}) {
		t.Fatalf("describe of alpha, beta, alpha described %v", got)
	}
	out = mustRun(t, "describe", "group", "--all", "-n", ns)
	if got := describedGroups(out); !slices.Equal(got, []string{alpha.Name, beta.Name}) {
		t.Fatalf("describe --all described %v", got)
	}
	out = mustRun(t, "describe", "group", "-A")
	for _, sg := range []*sharestatev1.ShareGroup{alpha, beta, gamma} {
		if !slices.Contains(describedGroups(out), sg.Name) {
			t.Fatalf("describe -A did not describe %s/%s", sg.Namespace, sg.Name)
		}
	}
	out = mustRun(t, "describe", "group", "many-beta", "many-gamma", "-A")
	if got := describedGroups(out); !slices.Equal(got, []string{beta.Name, gamma.Name}) {
		t.Fatalf("describe -A of beta and gamma described %v", got)
	}

	wantItems := []string{"ShareGroup " + ns + "/" + alpha.Name, "SharePartitionState " + ns + "/" + spsAlpha0,
		"SharePartitionState " + ns + "/" + spsAlpha1, "ShareGroup " + ns + "/" + beta.Name}
	for _, format := range []string{"json", "yaml"} {
		l := parseList(t, format, mustRun(t, "describe", "group", "--all", "-n", ns, "-o", format))
		if got := l.itemKinds(); !slices.Equal(got, wantItems) {
			t.Fatalf("describe -o %s: items %v, want %v", format, got, wantItems)
		}
	}
	out = mustRun(t, "describe", "group", "many-alpha", "-n", ns, "-o", `jsonpath={range .items[?(@.kind=="SharePartitionState")]}{.spec.partition}={.status.stateEpoch} {end}`)
	if out != "0=0 1=0 " {
		t.Fatalf("describe -o jsonpath: %q", out)
	}
	out = mustRun(t, "describe", "group", "many-alpha", "-n", ns, "-o", "custom-columns=KIND:.kind,NAME:.metadata.name,PARTITION:.spec.partition")
	lineMatching(t, out, `^KIND\s+NAME\s+PARTITION$`)
	lineMatching(t, out, `^ShareGroup\s+`+alpha.Name+`\s+<none>$`)
	lineMatching(t, out, `^SharePartitionState\s+`+spsAlpha1+`\s+1$`)
	out = mustRun(t, "describe", "group", "many-alpha", "-n", ns, "-o", "name")
	want := "sharegroup.sharestate.dev/" + alpha.Name + "\nsharepartitionstate.sharestate.dev/" + spsAlpha0 + "\nsharepartitionstate.sharestate.dev/" + spsAlpha1 + "\n"
	if out != want {
		t.Fatalf("describe -o name: %q, want %q", out, want)
	}

	mustFail(t, "", "name groups or pass --all, not both", "describe", "group", "many-alpha", "--all", "-n", ns)
	mustFail(t, "", "name at least one group, or pass --all", "describe", "group", "-n", ns)
	r := kubectlSharestate(t, "", "describe", "group", "--all", "-n", env.Namespace(t))
	if r.err != nil || r.out != "" || !strings.HasPrefix(r.errOut, "No share groups found in namespace ") {
		t.Fatalf("describe --all of an empty namespace: out %q, errOut %q, error %v", r.out, r.errOut, r.err)
	}
}

// describedGroups lists the object names of the groups in describe's output, in order.
func describedGroups(out string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^Name:\s+(\S+)$`).FindAllStringSubmatch(out, -1) {
		names = append(names, m[1])
	}
	return names
}
