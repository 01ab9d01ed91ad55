package plugin

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// printGroupReport renders describe group's output.
func printGroupReport(w io.Writer, r *groupReport, now time.Time) error {
	p := &printer{w: w}
	sg := r.group
	p.fields(
		[2]string{"Name", sg.Name},
		[2]string{"Namespace", sg.Namespace},
		[2]string{"Group ID", string(sg.Spec.GroupID)},
		[2]string{"Topics", declaredTopics(sg)},
		[2]string{"Settings", settings(sg.Spec.Settings)},
		[2]string{"Reset Request", resetRequest(sg.Spec.OffsetReset)},
	)
	p.printf("Partitions:\n")
	if len(r.partitions) == 0 {
		p.printf("  <none>\n")
	} else {
		p.table("  ", []string{"TOPIC", "PARTITION", "STATE EPOCH", "LEADER EPOCH", "START OFFSET", "LEADER (BROKER/POD)",
			"IN-FLIGHT", "DELIVERY COMPLETE", "INITIALIZED", "FENCED"}, partitionCells(r.partitions))
	}
	for _, row := range r.partitions {
		if row.corrupt != "" {
			p.printf("  Warning: partition %d of %s (%s) holds corrupt state batches: %s\n", row.partition, row.topic, row.name, row.corrupt)
		}
	}
	p.fields([2]string{"Totals", totals(r.partitions)})
	p.printf("Conditions:\n")
	printConditions(p, sg.Status.Conditions, now)
	p.fields([2]string{"Last Offset Reset", lastReset(sg.Status.LastOffsetReset, now)})
	printFencedHistory(p, r, now)
	return p.err
}

func declaredTopics(sg *sharestatev1.ShareGroup) string {
	if len(sg.Spec.Topics) == 0 {
		return "<none declared: every partition is known>"
	}
	parts := make([]string, len(sg.Spec.Topics))
	for i, t := range sg.Spec.Topics {
		parts[i] = fmt.Sprintf("%s, %s", topicLabel(t.Name, t.TopicID), counted(t.Partitions, "partition"))
	}
	return strings.Join(parts, "; ")
}

func settings(s *sharestatev1.ShareGroupSettings) string {
	if s == nil {
		return "<broker defaults>"
	}
	var parts []string
	if s.DeliveryCountLimit != nil {
		parts = append(parts, fmt.Sprintf("deliveryCountLimit=%d", *s.DeliveryCountLimit))
	}
	if s.RecordLockDurationMs != nil {
		parts = append(parts, fmt.Sprintf("recordLockDurationMs=%d", *s.RecordLockDurationMs))
	}
	if s.MaxRecordLocks != nil {
		parts = append(parts, fmt.Sprintf("maxRecordLocks=%d", *s.MaxRecordLocks))
	}
	if s.AutoOffsetReset != "" {
		parts = append(parts, "autoOffsetReset="+string(s.AutoOffsetReset))
	}
	if len(parts) == 0 {
		return "<broker defaults>"
	}
	return strings.Join(parts, ", ")
}

// resetRequest shows spec.offsetReset in one line.
func resetRequest(req *sharestatev1.OffsetResetRequest) string {
	if req == nil {
		return "<none>"
	}
	parts := make([]string, len(req.Topics))
	for i, t := range req.Topics {
		parts[i] = fmt.Sprintf("topic %s to %s", t.TopicID, resetDestination(t))
		if len(t.Partitions) > 0 {
			parts[i] += " (partitions " + joinInt32(t.Partitions) + ")"
		}
	}
	return fmt.Sprintf("%s: %s", req.ID, strings.Join(parts, "; "))
}

// resetDestination says where a reset topic goes: "Earliest", "Offset 500", "AutoOffsetReset".
func resetDestination(t sharestatev1.OffsetResetTopic) string {
	if t.To == sharestatev1.OffsetResetToOffset && t.Offset != nil {
		return fmt.Sprintf("Offset %d", *t.Offset)
	}
	return string(t.To)
}

func joinInt32(values []int32) string {
	parts := make([]string, len(values))
	for i, v := range values {
		parts[i] = strconv.FormatInt(int64(v), 10)
	}
	return strings.Join(parts, ",")
}

func partitionCells(rows []partitionRow) [][]string {
	cells := make([][]string, len(rows))
	for i, r := range rows {
		inFlight := strconv.FormatInt(r.inFlight, 10)
		if r.corrupt != "" {
			inFlight = "<corrupt>"
		}
		cells[i] = []string{
			r.topic, itoa(r.partition), itoa(r.stateEpoch), itoa(r.leaderEpoch), strconv.FormatInt(r.startOffset, 10),
			leaderCell(r.leader), inFlight, knownCount(r.deliveryComplete), r.initializedCond, fencedCell(r.fencedCond),
		}
	}
	return cells
}

func itoa(v int32) string { return strconv.FormatInt(int64(v), 10) }

// knownCount shows a count where -1 means unknown.
func knownCount(v int32) string {
	if v < 0 {
		return "unknown"
	}
	return itoa(v)
}

func leaderCell(l *sharestatev1.LeaderRef) string {
	if l == nil {
		return "-"
	}
	return fmt.Sprintf("%d/%s", l.BrokerID, orDash(l.PodName))
}

func fencedCell(c *metav1.Condition) string {
	if c == nil {
		return "-"
	}
	return string(c.Status)
}

// totals sums the partitions the way the operator does for the group's status, but from the
// partitions as they are now (the group's status is refreshed only now and then).
func totals(rows []partitionRow) string {
	var initialized, fenced, withLeader, corrupt int
	var inFlight, complete int64
	var epoch int32
	for _, r := range rows {
		epoch = max(epoch, r.stateEpoch)
		if r.initialized {
			initialized++
		}
		if r.fenced() {
			fenced++
		}
		if r.leader != nil {
			withLeader++
		}
		if r.corrupt != "" {
			corrupt++
		}
		inFlight += r.inFlight
		if r.deliveryComplete > 0 {
			complete += int64(r.deliveryComplete)
		}
	}
	s := fmt.Sprintf("%s: %d initialized, %d fenced, %d with a leader; %s in flight, %d delivery complete; highest state epoch %d",
		counted(len(rows), "partition"), initialized, fenced, withLeader, counted(inFlight, "record"), complete, epoch)
	if corrupt > 0 {
		s += fmt.Sprintf("; %d corrupt (not counted)", corrupt)
	}
	return s
}

func printConditions(p *printer, conditions []metav1.Condition, now time.Time) {
	if len(conditions) == 0 {
		p.printf("  <none: the operator has not reconciled the group>\n")
		return
	}
	rows := make([][]string, len(conditions))
	for i, c := range conditions {
		rows[i] = []string{c.Type, string(c.Status), c.Reason, stamp(c.LastTransitionTime, now), c.Message}
	}
	p.table("  ", []string{"TYPE", "STATUS", "REASON", "LAST TRANSITION", "MESSAGE"}, rows)
}

func lastReset(r *sharestatev1.OffsetResetStatus, now time.Time) string {
	if r == nil {
		return "<none>"
	}
	s := fmt.Sprintf("%s at state epoch %d, started %s", r.ID, r.StateEpoch, stampPtr(r.StartTime, now))
	if r.CompletionTime == nil {
		return s + ", in progress"
	}
	return s + fmt.Sprintf(", completed %s, %d partitions", stampPtr(r.CompletionTime, now), r.Partitions)
}

func stampPtr(t *metav1.Time, now time.Time) string {
	if t == nil {
		return "-"
	}
	return stamp(*t, now)
}

// printFencedHistory shows each partition's Fenced condition as the operator last set it, and the
// Fenced and LeaderChanged events of the group's partitions.
func printFencedHistory(p *printer, r *groupReport, now time.Time) {
	p.printf("Fenced History:\n")
	var rows [][]string
	for _, row := range r.partitions {
		if c := row.fencedCond; c != nil {
			rows = append(rows, []string{row.topic, itoa(row.partition), string(c.Status), c.Reason, stamp(c.LastTransitionTime, now), c.Message})
		}
	}
	if len(rows) == 0 {
		p.printf("  <no Fenced condition on any partition>\n")
	} else {
		p.table("  ", []string{"TOPIC", "PARTITION", "FENCED", "REASON", "SINCE", "MESSAGE"}, rows)
	}
	p.printf("Events (Fenced, LeaderChanged):\n")
	switch {
	case r.eventsNote != "":
		p.printf("  <%s>\n", r.eventsNote)
	case len(r.events) == 0:
		p.printf("  <none>\n")
	default:
		byName := make(map[string]partitionRow, len(r.partitions))
		for _, row := range r.partitions {
			byName[row.name] = row
		}
		rows = rows[:0]
		for i := range r.events {
			e := &r.events[i]
			row := byName[e.Regarding.Name]
			rows = append(rows, []string{stamp(metav1.NewTime(eventTime(e)), now), e.Type, e.Reason, row.topic, itoa(row.partition), e.Note})
		}
		p.table("  ", []string{"TIME", "TYPE", "REASON", "TOPIC", "PARTITION", "MESSAGE"}, rows)
	}
}
