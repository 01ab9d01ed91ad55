package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

func newDescribeCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe",
		Short: "Show the details of a share group",
	}
	cmd.AddCommand(newDescribeGroupCommand(o))
	requireKind(cmd)
	return cmd
}

func newDescribeGroupCommand(o *rootOptions) *cobra.Command {
	do := &describeOptions{out: newOutputFlags()}
	cmd := &cobra.Command{
		Use:     "group [NAME|GROUP_ID ...] [--all | -A]",
		Aliases: []string{"groups", "sharegroup", "sg"},
		Short:   "Show share groups' partitions, totals, conditions, last offset reset and fencing history",
		Long: `Show one or more share groups: each group's partitions with their state epoch, leader and records
in flight, the totals, the conditions, the last offset reset and the fencing history.

Name the groups (object names or Kafka group ids), or pass --all for every group of the namespace,
or -A without names for every group of every namespace. With names, -A finds each in any namespace.

With -o, the objects describe reads are printed as a List: each ShareGroup followed by its
SharePartitionStates, as the API server has them.`,
		Example: `  kubectl sharestate describe group orders
  kubectl sharestate describe group orders payments -n kafka
  kubectl sharestate describe group orders-processors -A   # by Kafka group id, in any namespace
  kubectl sharestate describe group -A                      # every group of every namespace
  kubectl sharestate describe group --all -o yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := do.validate(args); err != nil {
				return err
			}
			s, err := o.connect()
			if err != nil {
				return err
			}
			return do.run(cmd.Context(), s, o.streams.ErrOut, args)
		},
	}
	cmd.Flags().BoolVarP(&do.allNamespaces, "all-namespaces", "A", false, "find the named groups in any namespace; without names, describe every group of every namespace")
	cmd.Flags().BoolVar(&do.all, "all", false, "describe every group of the namespace (of every namespace with -A)")
	do.out.addFlags(cmd)
	return cmd
}

type describeOptions struct {
	allNamespaces bool
	all           bool
	out           *outputFlags
}

func (do *describeOptions) validate(args []string) error {
	switch {
	case len(args) > 0 && do.all:
		return errors.New("name groups or pass --all, not both")
	case len(args) == 0 && !do.all && !do.allNamespaces:
		return errors.New("name at least one group, or pass --all (every group of the namespace) or -A (of every namespace)")
	}
	return do.out.validate()
}

// run describes the groups found, then reports the ones that were not, as kubectl describe does: a
// name that is missing neither hides the others nor passes unnoticed (the command fails).
func (do *describeOptions) run(ctx context.Context, s *session, errOut io.Writer, args []string) error {
	groups, findErr := do.groups(ctx, s, args)
	if len(groups) == 0 {
		if findErr != nil {
			return findErr
		}
		_, err := fmt.Fprintln(errOut, "No share groups found in "+s.where(do.allNamespaces)+".")
		return err
	}
	if !do.out.human() {
		return errors.Join(s.printDescribedObjects(ctx, do.out, groups), findErr)
	}
	now := time.Now()
	for i := range groups {
		report, err := s.gatherGroup(ctx, &groups[i])
		if err != nil {
			return errors.Join(err, findErr)
		}
		if i > 0 {
			if _, err := fmt.Fprintln(s.out); err != nil {
				return err
			}
		}
		if err := printGroupReport(s.out, report, now); err != nil {
			return err
		}
	}
	return findErr
}

// groups finds the named groups, each once, in the order named, and says which it could not find
// (the error); or lists them all.
func (do *describeOptions) groups(ctx context.Context, s *session, args []string) ([]sharestatev1.ShareGroup, error) {
	if len(args) == 0 {
		return s.listGroups(ctx, do.allNamespaces)
	}
	var groups []sharestatev1.ShareGroup
	var errs []error
	seen := map[types.UID]bool{}
	for _, arg := range args {
		sg, err := s.findGroup(ctx, arg, do.allNamespaces)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !seen[sg.UID] {
			seen[sg.UID] = true
			groups = append(groups, *sg)
		}
	}
	return groups, errors.Join(errs...)
}

// printDescribedObjects prints, through -o, each group followed by its SharePartitionStates.
func (s *session) printDescribedObjects(ctx context.Context, out *outputFlags, groups []sharestatev1.ShareGroup) error {
	var objs []*unstructured.Unstructured
	for i := range groups {
		partitions, err := s.listPartitions(ctx, &groups[i])
		if err != nil {
			return err
		}
		u, err := toUnstructured(s.scheme, &groups[i])
		if err != nil {
			return err
		}
		objs = append(objs, u)
		for j := range partitions {
			if u, err = toUnstructured(s.scheme, &partitions[j]); err != nil {
				return err
			}
			objs = append(objs, u)
		}
	}
	return out.printObjects(s.out, true, objs...)
}

// groupReport is everything describe shows about a group.
type groupReport struct {
	group      *sharestatev1.ShareGroup
	partitions []partitionRow
	events     []eventsv1.Event
	// eventsNote says why events could not be listed ("" when they could).
	eventsNote string
}

// partitionRow is one share-partition as describe shows it.
type partitionRow struct {
	name             string
	topic            string // the declared or recorded name, else the id
	partition        int32
	stateEpoch       int32
	leaderEpoch      int32
	startOffset      int64
	leader           *sharestatev1.LeaderRef
	initialized      bool // the persister initialized the state (createTime is set)
	inFlight         int64
	deliveryComplete int32  // -1: unknown
	corrupt          string // why the stored batches do not decode
	initializedCond  string // the Initialized condition's status, "-" when unset
	fencedCond       *metav1.Condition
}

// fenced reports what the operator counts as fenced: a Fenced condition True and no leader since.
func (r partitionRow) fenced() bool {
	return r.leader == nil && r.fencedCond != nil && r.fencedCond.Status == metav1.ConditionTrue
}

func (s *session) gatherGroup(ctx context.Context, sg *sharestatev1.ShareGroup) (*groupReport, error) {
	partitions, err := s.listPartitions(ctx, sg)
	if err != nil {
		return nil, err
	}
	report := &groupReport{group: sg, partitions: make([]partitionRow, len(partitions))}
	names := make(map[string]bool, len(partitions))
	for i := range partitions {
		report.partitions[i] = newPartitionRow(sg, &partitions[i])
		names[partitions[i].Name] = true
	}
	report.events, report.eventsNote = s.fencingEvents(ctx, sg.Namespace, names)
	return report, nil
}

func newPartitionRow(sg *sharestatev1.ShareGroup, p *sharestatev1.SharePartitionState) partitionRow {
	name := p.Spec.TopicName
	if name == "" {
		name = topicName(sg, p.Spec.TopicID)
	}
	row := partitionRow{
		name:             p.Name,
		topic:            name,
		partition:        p.Spec.Partition,
		stateEpoch:       p.Status.StateEpoch,
		leaderEpoch:      p.Status.LeaderEpoch,
		startOffset:      p.Status.StartOffset,
		leader:           p.Status.Leader,
		initialized:      p.Status.CreateTime != nil,
		deliveryComplete: p.Status.DeliveryCompleteCount,
		initializedCond:  conditionStatus(p.Status.Conditions, sharestatev1.ConditionInitialized),
		fencedCond:       meta.FindStatusCondition(p.Status.Conditions, sharestatev1.ConditionFenced),
	}
	if name == "" {
		row.topic = string(p.Spec.TopicID)
	}
	batches, err := persister.StoredBatches(&p.Status)
	if err != nil {
		row.corrupt = err.Error()
	} else {
		row.inFlight = sharestate.InFlightRecords(batches)
	}
	return row
}

// storedBatches returns the partition's batches in their storage form.
func storedBatches(p *sharestatev1.SharePartitionState) []string {
	stored := make([]string, len(p.Status.StateBatches))
	for i, b := range p.Status.StateBatches {
		stored[i] = string(b)
	}
	return stored
}

// fencingEvents lists the Fenced and LeaderChanged events about the named partitions, oldest first.
// Events are a history that may be missing (expired, or not readable with the caller's rights): a
// failure is reported in the note, not as the command's error.
func (s *session) fencingEvents(ctx context.Context, namespace string, partitions map[string]bool) ([]eventsv1.Event, string) {
	if len(partitions) == 0 {
		return nil, ""
	}
	var list eventsv1.EventList
	err := s.client.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{"regarding.kind": "SharePartitionState"})
	if apierrors.IsForbidden(err) {
		return nil, "not allowed to list events.k8s.io events in " + namespace
	}
	if err != nil {
		return nil, fmt.Sprintf("cannot list events: %v", err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if partitions[e.Regarding.Name] && (e.Reason == sharestatev1.EventReasonFenced || e.Reason == sharestatev1.EventReasonLeaderChanged) {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(&out[i]).Before(eventTime(&out[j])) })
	return out, ""
}

// eventTime is when an event was last observed.
func eventTime(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	default:
		return e.CreationTimestamp.Time
	}
}
