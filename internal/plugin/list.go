package plugin

import (
	"context"
	"fmt"
	"sort"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

func newListCommand(o *rootOptions) *cobra.Command {
	var allNamespaces bool
	out := newTableOutputFlags()
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the share groups with their state",
		Long: `List the share groups (ShareGroup objects) of a namespace, or of every namespace with -A, with
their state: Ready, or why not (PartitionsFenced, PartitionsNotInitialized, NoPartitions), Resetting
while an offset reset runs, Deleting, or Pending until the operator has looked at the group.
With -o wide, also how many partitions are initialized and led, the records in flight, and the
message of the Ready condition.`,
		Example: `  kubectl sharestate list -A
  kubectl sharestate list -o wide
  kubectl sharestate list -n kafka -o custom-columns=GROUP:.spec.groupId,READY:.status.conditions[?(@.type=="Ready")].status`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			s, err := o.connect()
			if err != nil {
				return err
			}
			groups, err := s.listGroups(cmd.Context(), allNamespaces)
			if err != nil {
				return err
			}
			if len(groups) == 0 && out.human() {
				_, err := fmt.Fprintln(o.streams.ErrOut, "No share groups found in "+s.where(allNamespaces)+".")
				return err
			}
			if out.human() {
				return printGroupTable(s, groups, printers.PrintOptions{WithNamespace: allNamespaces, Wide: out.wide()})
			}
			return printGroupObjects(s, out, groups, true)
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "list the groups of every namespace")
	out.addFlags(cmd)
	return cmd
}

// listGroups lists the ShareGroups of the session's namespace, or of all, sorted by namespace and name.
func (s *session) listGroups(ctx context.Context, allNamespaces bool) ([]sharestatev1.ShareGroup, error) {
	var list sharestatev1.ShareGroupList
	var opts []client.ListOption
	if !allNamespaces {
		opts = append(opts, client.InNamespace(s.namespace))
	}
	if err := s.client.List(ctx, &list, opts...); err != nil {
		return nil, apiError(err, "listing ShareGroups in %s", s.where(allNamespaces))
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := &list.Items[i], &list.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return list.Items, nil
}

// where names the namespaces a command looks in.
func (s *session) where(allNamespaces bool) string {
	if allNamespaces {
		return "any namespace"
	}
	return fmt.Sprintf("namespace %q", s.namespace)
}

// groupState is a group's state in one word: Ready, the reason it is not, Resetting, Deleting, or
// Pending before the operator has reported on the group's current generation.
func groupState(sg *sharestatev1.ShareGroup) string {
	if !sg.DeletionTimestamp.IsZero() {
		return "Deleting"
	}
	if c := meta.FindStatusCondition(sg.Status.Conditions, sharestatev1.ConditionOffsetReset); c != nil &&
		c.Reason == sharestatev1.ReasonResetInProgress && c.ObservedGeneration >= sg.Generation {
		return "Resetting"
	}
	ready := meta.FindStatusCondition(sg.Status.Conditions, sharestatev1.ConditionReady)
	switch {
	case ready == nil:
		return "Pending"
	case ready.Status == metav1.ConditionTrue:
		return "Ready"
	case ready.Reason != "":
		return ready.Reason
	}
	return "NotReady"
}

// groupTable is list's human-readable view as a metav1.Table, which cli-runtime's table printer
// aligns (and prefixes with the namespace under -A) the way kubectl get does. The columns of priority 1
// are shown with -o wide only.
func groupTable(groups []sharestatev1.ShareGroup) *metav1.Table {
	table := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name"},
		{Name: "Group ID", Type: "string"},
		{Name: "State", Type: "string"},
		{Name: "Partitions", Type: "integer"},
		{Name: "Fenced", Type: "integer"},
		{Name: "State Epoch", Type: "integer"},
		{Name: "Age", Type: "string"},
		{Name: "Initialized", Type: "integer", Priority: 1},
		{Name: "With Leader", Type: "integer", Priority: 1},
		{Name: "In Flight", Type: "integer", Priority: 1},
		{Name: "Message", Type: "string", Priority: 1},
	}}
	for i := range groups {
		sg := &groups[i]
		st := &sg.Status
		table.Rows = append(table.Rows, metav1.TableRow{
			Cells: []any{sg.Name, string(sg.Spec.GroupID), groupState(sg), st.Partitions, st.FencedPartitions,
				st.StateEpoch, duration.HumanDuration(metav1.Now().Sub(sg.CreationTimestamp.Time)),
				st.InitializedPartitions, st.PartitionsWithLeader, st.InFlightRecords, readyMessage(sg)},
			Object: runtime.RawExtension{Object: sg},
		})
	}
	return table
}

// readyMessage is the message of the group's Ready condition, or "" before the operator set one.
func readyMessage(sg *sharestatev1.ShareGroup) string {
	if c := meta.FindStatusCondition(sg.Status.Conditions, sharestatev1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

func printGroupTable(s *session, groups []sharestatev1.ShareGroup, options printers.PrintOptions) error {
	return printers.NewTablePrinter(options).PrintObj(groupTable(groups), s.out)
}

// printGroupObjects prints the groups as the API server has them, through -o.
func printGroupObjects(s *session, out *outputFlags, groups []sharestatev1.ShareGroup, asList bool) error {
	objs := make([]*unstructured.Unstructured, len(groups))
	for i := range groups {
		u, err := toUnstructured(s.scheme, &groups[i])
		if err != nil {
			return err
		}
		objs[i] = u
	}
	return out.printObjects(s.out, asList, objs...)
}
