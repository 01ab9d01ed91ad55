package plugin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// resetIDPattern is the schema's pattern of spec.offsetReset.id (at most 63 characters).
var resetIDPattern = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9._-]*[a-zA-Z0-9])?$`)

type resetOptions struct {
	topic      string
	toEarliest bool
	toLatest   bool
	toOffset   int64
	toAuto     bool
	partitions []int32
	id         string
	dryRun     dryRun
	execute    bool
	timeout    time.Duration
	poll       time.Duration
}

func newResetOffsetsCommand(o *rootOptions) *cobra.Command {
	ro := &resetOptions{poll: 250 * time.Millisecond, dryRun: dryRunNone}
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic TOPIC (--to-earliest | --to-latest | --to-offset N | --to-auto) (--dry-run[=client|server] | --execute)",
		Short: "Reset a share group's start offsets on a topic, carried out by the operator",
		Long: `Reset a share group's start offsets on one topic (Kafka's AlterShareGroupOffsets).

As Kafka's kafka-share-groups.sh --reset-offsets, the command takes one of two flags: --dry-run
shows the plan (the request, the partitions it resets, their state now and the state epoch the
operator would choose) and changes nothing; --execute shows the same plan and carries it out. Without
either it refuses. --dry-run takes kubectl's values too: client (the same as a bare --dry-run),
server (the API server also checks the request, and stores nothing) and none (no dry run).

--to-latest starts from the log end, as Kafka's --to-latest does, with one difference: the plugin
cannot read the log, so it clears the start offset and each leader sets it to the log end when it
next reads the partition (which the reset makes it do before it writes again), as
share.auto.offset.reset=latest does. It is refused when the group declares another
spec.settings.autoOffsetReset.

--execute writes the request to the ShareGroup's spec.offsetReset, unless the plan says the
operator would refuse it (then nothing is written); the operator then raises the state epoch above
every partition's and initializes each named partition afresh at it, with the new start offset,
which fences every live leader. The command waits until the operator reports the reset done. Should
the operator refuse the request all the same (the group changed in between), the command takes its
request back out of the spec.

A request runs once per id: running the command again with the same --id waits for (or reports) the
same reset, it does not reset again.`,
		Example: `  kubectl sharestate reset-offsets orders --topic orders --to-earliest --partitions 0,3 --dry-run
  kubectl sharestate reset-offsets orders --topic orders --to-latest --dry-run=server
  kubectl sharestate reset-offsets orders --topic q1Sh0o2QRbuBzMz8vEMbvQ --to-offset 1200 --execute`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			topic, err := ro.validate(cmd.Flags().Changed("to-offset"))
			if err != nil {
				return err
			}
			return ro.run(cmd.Context(), o, args[0], topic)
		},
	}
	f := cmd.Flags()
	f.StringVar(&ro.topic, "topic", "", "the topic to reset: its Kafka topic id, or the name the group declares for it (required)")
	f.BoolVar(&ro.toEarliest, "to-earliest", false, "start from the earliest offset (0: the leader moves it up to the log start)")
	f.BoolVar(&ro.toLatest, "to-latest", false, "start from the latest offset, the log end: the start offset is cleared, and the leader applies share.auto.offset.reset=latest")
	f.Int64Var(&ro.toOffset, "to-offset", 0, "start from this offset")
	f.BoolVar(&ro.toAuto, "to-auto", false, "clear the start offset: the leader applies share.auto.offset.reset")
	f.Int32SliceVar(&ro.partitions, "partitions", nil, "reset only these `partitions`, e.g. 0,1,2 (default: every partition the group declares)")
	f.Lookup("partitions").DefValue = "" // the usage gives the default; pflag would add "(default [])"
	f.StringVar(&ro.id, "id", "", "the request's id (default: a new one); the same id again is the same request")
	f.Var(&ro.dryRun, "dry-run", "show the plan, the request and the partitions it would reset, and change nothing: client (the same as a bare --dry-run), "+
		"server (the API server also checks the request) or none")
	f.Lookup("dry-run").NoOptDefVal = string(dryRunClient)
	f.BoolVar(&ro.execute, "execute", false, "show the plan and carry it out: write the request and wait for the operator")
	f.DurationVar(&ro.timeout, "timeout", 2*time.Minute, "how long to wait for the operator to carry out the reset")
	return cmd
}

// validate checks the flags before anything is read from the cluster, and returns the topic's reset
// (its topic id still to be resolved). It fills in a new id when none was given.
func (ro *resetOptions) validate(toOffsetSet bool) (sharestatev1.OffsetResetTopic, error) {
	var t sharestatev1.OffsetResetTopic
	// Kafka's kafka-share-groups.sh --reset-offsets takes exactly one of --dry-run and --execute and
	// refuses neither or both (checkArgs in tools/src/main/java/org/apache/kafka/tools/consumer/group/
	// ShareGroupCommandOptions.java, apache/kafka b7f6ebe2ee3497b3907e803daea5839187fdcff3): so here.
	if ro.dryRun.on() == ro.execute {
		return t, errors.New("reset-offsets takes one of --dry-run (show the plan, change nothing) and --execute (carry it out)")
	}
	if ro.topic == "" {
		return t, errors.New("--topic is required")
	}
	chosen := 0
	for _, set := range []bool{ro.toEarliest, ro.toLatest, toOffsetSet, ro.toAuto} {
		if set {
			chosen++
		}
	}
	if chosen != 1 {
		return t, errors.New("exactly one of --to-earliest, --to-latest, --to-offset N and --to-auto is required")
	}
	switch {
	case ro.toEarliest:
		t.To = sharestatev1.OffsetResetToEarliest
	case ro.toAuto, ro.toLatest: // --to-latest: checked against the group's setting once it is read
		t.To = sharestatev1.OffsetResetToAutoOffsetReset
	default:
		if ro.toOffset < 0 {
			return t, fmt.Errorf("--to-offset %d is negative", ro.toOffset)
		}
		t.To, t.Offset = sharestatev1.OffsetResetToOffset, &ro.toOffset
	}
	for _, p := range ro.partitions {
		if p < 0 {
			return t, fmt.Errorf("--partitions: partition %d is negative", p)
		}
	}
	if len(ro.partitions) > 0 {
		t.Partitions = slices.Compact(slices.Sorted(slices.Values(ro.partitions)))
	}
	if ro.timeout <= 0 {
		return t, fmt.Errorf("--timeout %s must be above zero", ro.timeout)
	}
	if ro.id == "" {
		id, err := newResetID(time.Now())
		if err != nil {
			return t, err
		}
		ro.id = id
	}
	if len(ro.id) > 63 || !resetIDPattern.MatchString(ro.id) {
		return t, fmt.Errorf("--id %q: want at most 63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit", ro.id)
	}
	return t, nil
}

// newResetID returns a request id that is new with overwhelming likelihood: the time and 4 random bytes.
func newResetID(now time.Time) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("choosing a reset id: %w", err)
	}
	return "reset-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), nil
}

func (ro *resetOptions) run(ctx context.Context, o *rootOptions, groupArg string, topic sharestatev1.OffsetResetTopic) error {
	s, err := o.connect()
	if err != nil {
		return err
	}
	sg, err := s.findGroup(ctx, groupArg, false)
	if err != nil {
		return err
	}
	if topic.TopicID, err = resolveTopic(sg, ro.topic); err != nil {
		return err
	}
	latestNote := ""
	if ro.toLatest {
		if latestNote, err = latestReset(sg); err != nil {
			return err
		}
	}
	req := sharestatev1.OffsetResetRequest{ID: ro.id, Topics: []sharestatev1.OffsetResetTopic{topic}}
	action, err := s.showPlan(ctx, sg, req, ro.dryRun.on())
	if err != nil {
		return err
	}
	if latestNote != "" {
		if err := s.printLatestNote(latestNote); err != nil {
			return err
		}
	}
	switch ro.dryRun {
	case dryRunClient:
		return nil
	case dryRunServer:
		return s.serverDryRun(ctx, sg, req, action)
	}
	sg, action, err = s.submitReset(ctx, sg, req)
	if err != nil {
		return err
	}
	if action != submitDone {
		if _, err := fmt.Fprintf(s.out, "Reset %q is in spec.offsetReset; waiting up to %s for the operator.\n", req.ID, ro.timeout); err != nil {
			return err
		}
	}
	if sg, err = s.waitReset(ctx, sg, req.ID, ro.timeout, ro.poll); err != nil {
		return err
	}
	return s.printResetOutcome(ctx, sg, req, action)
}

// submitReset writes req into the group's spec, unless decideSubmit says otherwise or the plan says
// the operator would refuse it. The write is conditional on the resourceVersion the decision was
// taken on; a conflict reads the group again and decides again (client-go's retry, with its backoff).
func (s *session) submitReset(ctx context.Context, sg *sharestatev1.ShareGroup, req sharestatev1.OffsetResetRequest) (*sharestatev1.ShareGroup, submitAction, error) {
	key := client.ObjectKeyFromObject(sg)
	action := submitWrite
	reread := false
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if reread {
			fresh := &sharestatev1.ShareGroup{}
			if err := s.client.Get(ctx, key, fresh); err != nil {
				return apiError(err, "reading ShareGroup %s", key)
			}
			sg = fresh
		}
		reread = true
		var err error
		if action, err = decideSubmit(sg, req); err != nil || action != submitWrite {
			return err
		}
		partitions, err := s.listPartitions(ctx, sg)
		if err != nil {
			return err
		}
		if _, err := planReset(sg, req, partitions); err != nil {
			return wouldRefuse(req.ID, err)
		}
		patch := client.MergeFromWithOptions(sg.DeepCopy(), client.MergeFromWithOptimisticLock{})
		written := sg.DeepCopy()
		written.Spec.OffsetReset = req.DeepCopy()
		if err := s.client.Patch(ctx, written, patch); err != nil {
			return apiError(err, "writing reset %q into ShareGroup %s", req.ID, key)
		}
		sg = written
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return sg, action, nil
}

// wouldRefuse is the error for a request the plan says the operator would refuse, before anything is
// written.
func wouldRefuse(id string, err error) error {
	return fmt.Errorf("the operator would refuse reset %q, so nothing was written: %w", id, err)
}

// waitReset polls the group until the operator reports request id done or refused, or timeout passes.
// A request the operator refused is taken back out of the spec.
func (s *session) waitReset(ctx context.Context, sg *sharestatev1.ShareGroup, id string, timeout, poll time.Duration) (*sharestatev1.ShareGroup, error) {
	generation := sg.Generation
	key := client.ObjectKeyFromObject(sg)
	var outcomeErr error // the operator's refusal, which ends the wait
	check := func() (bool, error) {
		done, err := resetOutcome(sg, id, generation)
		if errors.Is(err, errRefused) {
			outcomeErr = err
			return true, nil
		}
		return done, err
	}
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		if done, err := check(); done || err != nil {
			return done, err
		}
		fresh := &sharestatev1.ShareGroup{}
		if err := s.client.Get(ctx, key, fresh); err != nil {
			if apierrors.IsNotFound(err) {
				return false, fmt.Errorf("ShareGroup %s was deleted while waiting for reset %q", key, id)
			}
			return false, apiError(err, "reading ShareGroup %s", key)
		}
		sg = fresh
		return check()
	})
	switch {
	case outcomeErr != nil:
		return nil, s.withdrawRefused(ctx, sg, id, outcomeErr)
	case wait.Interrupted(err) && ctx.Err() == nil:
		return nil, fmt.Errorf("reset %q was not carried out within %s (%s); the request stays in the group's spec, is the operator running?",
			id, timeout, resetProgress(sg))
	case err != nil && ctx.Err() != nil:
		return nil, fmt.Errorf("waiting for reset %q: %w", id, ctx.Err())
	case err != nil:
		return nil, err
	}
	return sg, nil
}

// withdrawRefused takes a refused request back out of the group's spec, so that no request the
// operator will never carry out is left behind. The write is conditional on the resourceVersion the
// refusal was read at: a request written since by someone else is never removed.
func (s *session) withdrawRefused(ctx context.Context, sg *sharestatev1.ShareGroup, id string, refusal error) error {
	if sg.Spec.OffsetReset == nil || sg.Spec.OffsetReset.ID != id {
		return refusal
	}
	patch := client.MergeFromWithOptions(sg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	withdrawn := sg.DeepCopy()
	withdrawn.Spec.OffsetReset = nil
	if err := s.client.Patch(ctx, withdrawn, patch); err != nil {
		return fmt.Errorf("%w; taking the request back out of spec.offsetReset failed: %w", refusal, err)
	}
	return fmt.Errorf("%w; the request was taken back out of spec.offsetReset", refusal)
}

// resetProgress says what the group's OffsetReset condition says.
func resetProgress(sg *sharestatev1.ShareGroup) string {
	c := meta.FindStatusCondition(sg.Status.Conditions, sharestatev1.ConditionOffsetReset)
	if c == nil || c.ObservedGeneration < sg.Generation {
		return "the operator has not reported on it"
	}
	return fmt.Sprintf("%s: %s", c.Reason, c.Message)
}

func (s *session) printResetOutcome(ctx context.Context, sg *sharestatev1.ShareGroup, req sharestatev1.OffsetResetRequest, action submitAction) error {
	l := sg.Status.LastOffsetReset
	if l == nil || l.ID != req.ID {
		return fmt.Errorf("the group does not record reset %q as its last one", req.ID)
	}
	verb := "completed"
	if action == submitDone {
		verb = "was already carried out"
	}
	p := &printer{w: s.out}
	now := time.Now()
	p.printf("Offset reset %q of group %q (ShareGroup %s/%s) %s: %s initialized at state epoch %d.\n",
		req.ID, sg.Spec.GroupID, sg.Namespace, sg.Name, verb, counted(l.Partitions, "partition"), l.StateEpoch)
	p.fields([2]string{"Started", stampPtr(l.StartTime, now)}, [2]string{"Completed", stampPtr(l.CompletionTime, now)})
	partitions, err := s.listPartitions(ctx, sg)
	if err != nil {
		return err
	}
	plan, err := planReset(sg, req, partitions)
	if err != nil {
		return p.err // the spec changed since: the summary above is what the operator recorded
	}
	rows := make([][]string, 0, len(plan.targets))
	for _, t := range plan.targets {
		epoch, start := "-", "-"
		if t.current != nil {
			epoch, start = itoa(t.current.Status.StateEpoch), strconv.FormatInt(t.current.Status.StartOffset, 10)
		}
		rows = append(rows, []string{topicLabel(topicName(sg, t.TopicID), t.TopicID), itoa(t.Partition), epoch, start})
	}
	p.table("", []string{"TOPIC", "PARTITION", "STATE EPOCH", "START OFFSET"}, rows)
	return p.err
}

// showPlan prints the request and what the operator would do with it, and says what reset-offsets
// does next: an error for a request the operator would refuse (or that conflicts with the group's).
func (s *session) showPlan(ctx context.Context, sg *sharestatev1.ShareGroup, req sharestatev1.OffsetResetRequest, dryRun bool) (submitAction, error) {
	partitions, err := s.listPartitions(ctx, sg)
	if err != nil {
		return 0, err
	}
	doc, err := yaml.Marshal(map[string]any{"spec": map[string]any{"offsetReset": req}})
	if err != nil {
		return 0, fmt.Errorf("rendering the request: %w", err)
	}
	p := &printer{w: s.out}
	if dryRun {
		p.printf("Dry run: nothing was changed. ")
	}
	p.printf("The request for ShareGroup %s/%s (group id %q):\n", sg.Namespace, sg.Name, sg.Spec.GroupID)
	p.printf("%s", indent(string(doc), "  "))
	action, err := decideSubmit(sg, req)
	switch {
	case err != nil:
		return 0, errors.Join(p.err, fmt.Errorf("the request would not be written: %w", err))
	case action == submitDone:
		p.printf("Reset %q was already carried out; the operator would not run it again.\n", req.ID)
		return action, p.err
	case action == submitPending:
		p.printf("Reset %q is already requested; the operator has not completed it yet.\n", req.ID)
	}
	plan, err := planReset(sg, req, partitions)
	if err != nil {
		return 0, errors.Join(p.err, wouldRefuse(req.ID, err))
	}
	p.printf("The operator would initialize %s at state epoch %d (higher if a partition is fenced meanwhile), fencing their leaders:\n",
		counted(len(plan.targets), "partition"), plan.stateEpoch)
	p.table("  ", []string{"TOPIC", "PARTITION", "STATE EPOCH", "START OFFSET", "NEW START OFFSET", "LEADER (BROKER/POD)"}, planCells(sg, plan))
	return action, p.err
}

func planCells(sg *sharestatev1.ShareGroup, plan resetPlan) [][]string {
	rows := make([][]string, len(plan.targets))
	for i, t := range plan.targets {
		epoch, start, leader := "-", "-", "-"
		if c := t.current; c != nil {
			epoch, start, leader = itoa(c.Status.StateEpoch), strconv.FormatInt(c.Status.StartOffset, 10), leaderCell(c.Status.Leader)
		}
		next := strconv.FormatInt(t.StartOffset, 10)
		if t.StartOffset == -1 {
			next = "-1 (auto.offset.reset)"
		}
		rows[i] = []string{topicLabel(topicName(sg, t.TopicID), t.TopicID), itoa(t.Partition), epoch, start, next, leader}
	}
	return rows
}

// indent prefixes every non-empty line of s.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(s, "\n")
	for i, l := range lines {
		if strings.TrimSpace(l) != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}
