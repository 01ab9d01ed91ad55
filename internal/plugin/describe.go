package plugin

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	return cmd
}

func newDescribeGroupCommand(o *rootOptions) *cobra.Command {
	var allNamespaces bool
	cmd := &cobra.Command{
		Use:     "group NAME|GROUP_ID",
		Aliases: []string{"sharegroup", "sg"},
		Short:   "Show a share group's partitions, totals, conditions, last offset reset and fencing history",
		Example: `  kubectl sharestate describe group orders
  kubectl sharestate describe group orders-processors -A   # by Kafka group id, in any namespace`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.connect()
			if err != nil {
				return err
			}
			sg, err := s.findGroup(cmd.Context(), args[0], allNamespaces)
			if err != nil {
				return err
			}
			report, err := s.gatherGroup(cmd.Context(), sg)
			if err != nil {
				return err
			}
			return printGroupReport(s.out, report, time.Now())
		},
	}
	cmd.Flags().BoolVarP(&allNamespaces, "all-namespaces", "A", false, "find the group in any namespace")
	return cmd
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
