package plugin

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

func TestCustomColumns(t *testing.T) {
	item := func(name string, partitions ...any) unstructured.Unstructured {
		return unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": name},
			"spec":     map[string]any{"partitions": partitions},
		}}
	}
	list := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{item("a", int64(0), int64(2)), item("b")}}
	for _, spec := range []string{"NAME:.metadata.name,PARTS:.spec.partitions[*],NOPE:.spec.nope", "NAME:{.metadata.name},PARTS:spec.partitions[*],NOPE:.spec.nope"} {
		p, err := newCustomColumnsPrinter(spec)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := p.PrintObj(list, &out); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		want := [][]string{{"NAME", "PARTS", "NOPE"}, {"a", "0,2", "<none>"}, {"b", "<none>", "<none>"}}
		if len(lines) != len(want) {
			t.Fatalf("%s: %d lines:\n%s", spec, len(lines), out.String())
		}
		for i, w := range want {
			if got := strings.Fields(lines[i]); strings.Join(got, "|") != strings.Join(w, "|") {
				t.Errorf("%s: line %d is %q, want %v", spec, i, lines[i], w)
			}
		}
	}
	for spec, wantErr := range map[string]string{
		"":                    "no custom columns given",
		"NAME":                `"NAME" is not NAME:JSONPATH`,
		"NAME:":               `"NAME:" is not NAME:JSONPATH`,
		"NAME:.a,:.b":         `":.b" is not NAME:JSONPATH`,
		"NAME:{.metadata.nam": "column NAME",
	} {
		if _, err := newCustomColumnsPrinter(spec); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("custom-columns=%s: error %v, want %q", spec, err, wantErr)
		}
	}
}

func TestErrorLine(t *testing.T) {
	for err, want := range map[error]string{
		errors.New("plain"): "plain",
		fmt.Errorf("unknown command %q for %q%s", "lsit", "kubectl sharestate", "\n\nDid you mean this?\n\tlist\n"):                    `unknown command "lsit" for "kubectl sharestate"; did you mean "list"?`,
		fmt.Errorf("unknown command %q for %q%s", "d", "kubectl sharestate", "\n\nDid you mean this?\n\tdelete\n\tdescribe\n\tdump\n"): `unknown command "d" for "kubectl sharestate"; did you mean one of "delete", "describe", "dump"?`,
		errors.Join(errors.New("one"), fmt.Errorf("two: %w", errors.New("three"))):                                                     "one; two: three",
	} {
		if got := ErrorLine(err); got != want {
			t.Errorf("ErrorLine(%q) = %q, want %q", err, got, want)
		}
	}
}

func TestGroupState(t *testing.T) {
	cond := func(condType string, status metav1.ConditionStatus, reason string, generation int64) metav1.Condition {
		return metav1.Condition{Type: condType, Status: status, Reason: reason, ObservedGeneration: generation}
	}
	now := metav1.Now()
	tests := []struct {
		name       string
		conditions []metav1.Condition
		deleting   bool
		want       string
	}{
		{name: "not reconciled", want: "Pending"},
		{name: "ready", conditions: []metav1.Condition{cond(sharestatev1.ConditionReady, metav1.ConditionTrue, sharestatev1.ReasonAllPartitionsReady, 4)}, want: "Ready"},
		{name: "fenced", conditions: []metav1.Condition{cond(sharestatev1.ConditionReady, metav1.ConditionFalse, sharestatev1.ReasonPartitionsFenced, 4)}, want: "PartitionsFenced"},
		{name: "resetting", conditions: []metav1.Condition{cond(sharestatev1.ConditionReady, metav1.ConditionTrue, sharestatev1.ReasonAllPartitionsReady, 4),
			cond(sharestatev1.ConditionOffsetReset, metav1.ConditionFalse, sharestatev1.ReasonResetInProgress, 4)}, want: "Resetting"},
		{name: "a reset of an older generation", conditions: []metav1.Condition{cond(sharestatev1.ConditionReady, metav1.ConditionTrue, sharestatev1.ReasonAllPartitionsReady, 4),
			cond(sharestatev1.ConditionOffsetReset, metav1.ConditionFalse, sharestatev1.ReasonResetInProgress, 3)}, want: "Ready"},
		{name: "deleting", conditions: []metav1.Condition{cond(sharestatev1.ConditionReady, metav1.ConditionTrue, sharestatev1.ReasonAllPartitionsReady, 4)}, deleting: true, want: "Deleting"},
	}
	for _, tc := range tests {
		sg := groupDeclaring(0)
		sg.Status.Conditions = tc.conditions
		if tc.deleting {
			sg.DeletionTimestamp = &now
		}
		if got := groupState(sg); got != tc.want {
			t.Errorf("%s: state %q, want %q", tc.name, got, tc.want)
		}
	}
}
