package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

type dumpOptions struct {
	topic         string
	partition     int32
	allNamespaces bool
	out           *outputFlags
}

func newDumpCommand(o *rootOptions) *cobra.Command {
	do := &dumpOptions{out: newOutputFlags()}
	cmd := &cobra.Command{
		Use:   "dump GROUP --topic TOPIC --partition P [-o json|yaml|jsonpath=...|custom-columns=...]",
		Short: "Show a share-partition's stored state, its record-state batches decoded",
		Long: `Show a share-partition's stored state, its record-state batches decoded one by one, so that a
batch that does not parse or overlaps the one before it is shown with its problem.

With -o, the decoded state is printed as a document of kind SharePartitionStateDump
(plugin.sharestate.dev/v1alpha1: the plugin's own, no API server serves it).`,
		Example: `  kubectl sharestate dump orders --topic orders --partition 3
  kubectl sharestate dump orders-processors -A --topic q1Sh0o2QRbuBzMz8vEMbvQ --partition 3 -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := do.validate(cmd.Flags().Changed("partition")); err != nil {
				return err
			}
			s, err := o.connect()
			if err != nil {
				return err
			}
			return do.run(cmd.Context(), s, args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&do.topic, "topic", "", "the topic: its Kafka topic id, or the name the group declares for it (required)")
	f.Int32Var(&do.partition, "partition", 0, "the partition (required)")
	f.BoolVarP(&do.allNamespaces, "all-namespaces", "A", false, "find the group in any namespace")
	do.out.addFlags(cmd)
	return cmd
}

// validate checks the flags before anything is read from the cluster. partitionSet says whether
// --partition was given: it has no default, and its zero value, which the help would otherwise show
// as one, is a partition like any other.
func (do *dumpOptions) validate(partitionSet bool) error {
	switch {
	case do.topic == "":
		return errors.New("--topic is required")
	case !partitionSet:
		return errors.New("--partition is required")
	case do.partition < 0:
		return fmt.Errorf("--partition %d is negative", do.partition)
	}
	return do.out.validate()
}

func (do *dumpOptions) run(ctx context.Context, s *session, groupArg string) error {
	sg, err := s.findGroup(ctx, groupArg, do.allNamespaces)
	if err != nil {
		return err
	}
	topicID, err := resolveTopic(sg, do.topic)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: sg.Namespace, Name: sharestatev1.SharePartitionStateName(string(sg.Spec.GroupID), string(topicID), do.partition)}
	sps := &sharestatev1.SharePartitionState{}
	if err := s.client.Get(ctx, key, sps); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("group %q has no state for partition %d of topic %s (no SharePartitionState %s)",
				sg.Spec.GroupID, do.partition, topicLabel(topicName(sg, topicID), topicID), key)
		}
		return apiError(err, "reading SharePartitionState %s", key)
	}
	d := newPartitionDump(sg, sps)
	if err := writeDump(s.out, d, do.out); err != nil {
		return err
	}
	if d.Corrupt != "" {
		return fmt.Errorf("the stored state of partition %d of topic %s is corrupt: %s", do.partition, topicID, d.Corrupt)
	}
	return nil
}

// partitionDump is a share-partition's state as dump shows it.
type partitionDump struct {
	Namespace             string                  `json:"-"` // in metadata
	Name                  string                  `json:"-"`
	GroupID               string                  `json:"groupId"`
	TopicID               string                  `json:"topicId"`
	TopicName             string                  `json:"topicName,omitempty"`
	Partition             int32                   `json:"partition"`
	Initialized           bool                    `json:"initialized"`
	StateEpoch            int32                   `json:"stateEpoch"`
	LeaderEpoch           int32                   `json:"leaderEpoch"`
	StartOffset           int64                   `json:"startOffset"`
	DeliveryCompleteCount int32                   `json:"deliveryCompleteCount"`
	InFlightRecords       *int64                  `json:"inFlightRecords,omitempty"` // unset when the batches are corrupt
	Leader                *sharestatev1.LeaderRef `json:"leader,omitempty"`
	CreateTime            *metav1.Time            `json:"createTime,omitempty"`
	WriteTime             *metav1.Time            `json:"writeTime,omitempty"`
	WriteCount            int64                   `json:"writeCount"`
	Batches               []batchRow              `json:"batches"`
	// Corrupt says why the stored batches are not a valid state; the rows say which.
	Corrupt string `json:"corrupt,omitempty"`
}

// batchRow is one stored batch, decoded. A batch that does not parse has only its stored form and
// the problem.
type batchRow struct {
	Stored        string `json:"stored"`
	FirstOffset   *int64 `json:"firstOffset,omitempty"`
	LastOffset    *int64 `json:"lastOffset,omitempty"`
	State         string `json:"state,omitempty"`
	DeliveryCount *int16 `json:"deliveryCount,omitempty"`
	Records       *int64 `json:"records,omitempty"`
	Problem       string `json:"problem,omitempty"`
}

func newPartitionDump(sg *sharestatev1.ShareGroup, p *sharestatev1.SharePartitionState) partitionDump {
	name := p.Spec.TopicName
	if name == "" {
		name = topicName(sg, p.Spec.TopicID)
	}
	d := partitionDump{
		Namespace: p.Namespace, Name: p.Name, GroupID: string(p.Spec.GroupID), TopicID: string(p.Spec.TopicID), TopicName: name,
		Partition: p.Spec.Partition, Initialized: p.Status.CreateTime != nil,
		StateEpoch: p.Status.StateEpoch, LeaderEpoch: p.Status.LeaderEpoch, StartOffset: p.Status.StartOffset,
		DeliveryCompleteCount: p.Status.DeliveryCompleteCount, Leader: p.Status.Leader,
		CreateTime: p.Status.CreateTime, WriteTime: p.Status.WriteTime, WriteCount: p.Status.WriteCount,
	}
	stored := storedBatches(p)
	d.Batches = batchRows(stored)
	batches, err := persister.StoredBatches(&p.Status)
	if err != nil {
		d.Corrupt = err.Error()
		return d
	}
	inFlight := sharestate.InFlightRecords(batches)
	d.InFlightRecords = &inFlight
	return d
}

// batchRows decodes each stored batch on its own, so that one corrupt batch does not hide the others,
// and marks those that do not parse or do not follow the previous one.
func batchRows(stored []string) []batchRow {
	rows := make([]batchRow, len(stored))
	var prev *sharestate.StateBatch
	for i, s := range stored {
		rows[i].Stored = s
		b, err := sharestate.ParseBatch(s)
		if err != nil {
			rows[i].Problem = err.Error()
			continue
		}
		records := b.LastOffset - b.FirstOffset + 1
		rows[i].FirstOffset, rows[i].LastOffset, rows[i].Records = &b.FirstOffset, &b.LastOffset, &records
		rows[i].State, rows[i].DeliveryCount = b.DeliveryState.String(), &b.DeliveryCount
		if prev != nil && b.FirstOffset <= prev.LastOffset {
			rows[i].Problem = fmt.Sprintf("overlaps or precedes the batch before it (%s)", prev)
		}
		prev = &b
	}
	return rows
}

func writeDump(w io.Writer, d partitionDump, out *outputFlags) error {
	if out.human() {
		return printDumpTable(w, d, time.Now())
	}
	u, err := d.unstructured()
	if err != nil {
		return err
	}
	return out.printObjects(w, false, u)
}

// unstructured is the dump as a document of kind SharePartitionStateDump, named as its
// SharePartitionState, for the printers of -o.
func (d partitionDump) unstructured() (*unstructured.Unstructured, error) {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&d)
	if err != nil {
		return nil, fmt.Errorf("rendering the dump: %w", err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(pluginGroupVersion.WithKind("SharePartitionStateDump"))
	u.SetNamespace(d.Namespace)
	u.SetName(d.Name)
	return u, nil
}

func printDumpTable(w io.Writer, d partitionDump, now time.Time) error {
	p := &printer{w: w}
	leader, inFlight := "-", "<corrupt>"
	if l := d.Leader; l != nil {
		leader = fmt.Sprintf("broker %d, pod %s, leader epoch %d, since %s", l.BrokerID, orDash(l.PodName), l.LeaderEpoch, stamp(l.Since, now))
	}
	if d.InFlightRecords != nil {
		inFlight = strconv.FormatInt(*d.InFlightRecords, 10)
	}
	initialized := "yes, " + stampPtr(d.CreateTime, now)
	if !d.Initialized {
		initialized = "no: the persister has not initialized this partition's state"
	}
	p.fields(
		[2]string{"SharePartitionState", d.Namespace + "/" + d.Name},
		[2]string{"Group ID", d.GroupID},
		[2]string{"Topic", topicLabel(d.TopicName, sharestatev1.TopicID(d.TopicID))},
		[2]string{"Partition", itoa(d.Partition)},
		[2]string{"Initialized", initialized},
		[2]string{"State Epoch", itoa(d.StateEpoch)},
		[2]string{"Leader Epoch", itoa(d.LeaderEpoch)},
		[2]string{"Start Offset", strconv.FormatInt(d.StartOffset, 10)},
		[2]string{"Delivery Complete", knownCount(d.DeliveryCompleteCount)},
		[2]string{"In Flight", inFlight},
		[2]string{"Leader", leader},
		[2]string{"Last Write", fmt.Sprintf("%s (%d writes since initialized)", stampPtr(d.WriteTime, now), d.WriteCount)},
		[2]string{"Batches", strconv.Itoa(len(d.Batches))},
	)
	if len(d.Batches) > 0 {
		p.printf("\n")
		p.table("", batchHeader(d), batchCells(d))
	}
	if d.Corrupt != "" {
		p.printf("\nCorrupt: %s\n", d.Corrupt)
	}
	return p.err
}

func batchHeader(d partitionDump) []string {
	h := []string{"FIRST", "LAST", "STATE", "DELIVERY COUNT", "RECORDS"}
	if d.Corrupt != "" {
		h = append(h, "STORED", "PROBLEM")
	}
	return h
}

func batchCells(d partitionDump) [][]string {
	rows := make([][]string, len(d.Batches))
	for i, b := range d.Batches {
		cells := []string{"?", "?", "?", "?", "?"}
		if b.FirstOffset != nil {
			cells = []string{strconv.FormatInt(*b.FirstOffset, 10), strconv.FormatInt(*b.LastOffset, 10), b.State,
				strconv.Itoa(int(*b.DeliveryCount)), strconv.FormatInt(*b.Records, 10)}
		}
		if d.Corrupt != "" {
			cells = append(cells, b.Stored, orDash(b.Problem))
		}
		rows[i] = cells
	}
	return rows
}
