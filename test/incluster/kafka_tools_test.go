//go:build cluster

package incluster

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// kafkaToolsAgree: Kafka's own kafka-share-groups.sh, run from a pod, and `kubectl sharestate
// describe` show one state. --describe --offsets shows the start offsets the plugin shows;
// --reset-offsets --to-earliest --execute on the group, which has no member left, takes both to 0,
// at a state epoch no lower than before. It may be the same: a partition whose state epoch the
// operator's fences had raised kept it through the reset in the runs here, as test/kafka's
// TestKafkaToolsOnOurState sees Initializes at an equal state epoch.
func (s *session) kafkaToolsAgree(t *testing.T) {
	logKafkaOnFailure(t)
	// The rolling restart's group: its consumer Job has finished.
	const topic, group = "in-pods-rollout", "in-pods-rollout-consumers"
	eventually(t, 2*time.Minute, "the group to have no members", func() error {
		out := shareGroups(t, "--describe --members --group "+group)
		if strings.Contains(out, "has no active members") || !strings.Contains(out, "CONSUMER-ID") {
			return nil
		}
		return fmt.Errorf("members left:\n%s", out)
	})
	before := describedPartitions(t, group)
	if kafkas := kafkaStartOffsets(t, group, topic); !maps.Equal(kafkas, startOffsets(before)) {
		t.Fatalf("kafka-share-groups.sh shows start offsets %v, kubectl sharestate describe %v", kafkas, startOffsets(before))
	}
	t.Logf("both show start offsets %v", startOffsets(before))
	t.Logf("kafka-share-groups.sh --reset-offsets --to-earliest:\n%s",
		shareGroups(t, "--reset-offsets --to-earliest --execute --topic "+topic+" --group "+group))
	eventually(t, time.Minute, "both to show start offset 0", func() error {
		kafkas, after := kafkaStartOffsets(t, group, topic), describedPartitions(t, group)
		for p, row := range after {
			if kafkas[p] != 0 || row.startOffset != 0 {
				return fmt.Errorf("partition %d: kafka-share-groups.sh shows start offset %d, kubectl sharestate %d", p, kafkas[p], row.startOffset)
			}
			if row.stateEpoch < before[p].stateEpoch {
				t.Fatalf("partition %d: state epoch %d after the reset, %d before: lowered", p, row.stateEpoch, before[p].stateEpoch)
			}
		}
		t.Logf("state epochs before the reset %v, after %v", stateEpochs(before), stateEpochs(after))
		return nil
	})
}

// shareGroups runs Kafka's kafka-share-groups.sh in the client pod with args.
func shareGroups(t *testing.T, args string) string {
	t.Helper()
	return sh(t, "kubectl exec -n kafka "+kafkaClient+" -- /opt/kafka/bin/kafka-share-groups.sh --bootstrap-server "+kafkaBootstrap+" "+args)
}

// kafkaStartOffsets is the start offset kafka-share-groups.sh --describe --offsets shows for each
// partition of topic in group.
func kafkaStartOffsets(t *testing.T, group, topic string) map[int32]int64 {
	t.Helper()
	out := shareGroups(t, "--describe --offsets --group "+group)
	offsets := kafkacluster.StartOffsets(out, group)[topic]
	if len(offsets) != kafkaNodes {
		t.Fatalf("kafka-share-groups.sh --describe --offsets shows %d partitions of %s, want %d:\n%s", len(offsets), topic, kafkaNodes, out)
	}
	return offsets
}

// described is one partition's row of kubectl sharestate describe group.
type described struct {
	stateEpoch, startOffset int64
}

// describedPartitions are the rows of kubectl sharestate describe group's partition table, by
// partition: the group consumes one topic, which the table names by its topic ID (the ShareGroup
// declares no topics).
func describedPartitions(t *testing.T, group string) map[int32]described {
	t.Helper()
	out := sh(t, "kubectl sharestate describe group "+group+" -n "+brokerNamespace)
	rows := map[int32]described{}
	inTable := false
	for line := range strings.Lines(out) {
		// TOPIC PARTITION STATE-EPOCH LEADER-EPOCH START-OFFSET ...
		f := strings.Fields(line)
		switch {
		case len(f) > 1 && f[0] == "TOPIC" && f[1] == "PARTITION":
			inTable = true
			continue
		case inTable && (len(f) == 0 || !strings.HasPrefix(line, "  ")):
			inTable = false
		}
		if !inTable {
			if len(rows) > 0 {
				break // the partition table is the first; the fenced history follows
			}
			continue
		}
		if len(f) < 5 {
			t.Fatalf("kubectl sharestate describe printed %q", line)
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		epoch, err2 := strconv.ParseInt(f[2], 10, 64)
		start, err3 := strconv.ParseInt(f[4], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("kubectl sharestate describe printed %q", line)
		}
		rows[int32(p)] = described{stateEpoch: epoch, startOffset: start}
	}
	if len(rows) != kafkaNodes {
		t.Fatalf("kubectl sharestate describe shows %d partitions, want %d:\n%s", len(rows), kafkaNodes, out)
	}
	return rows
}

func startOffsets(rows map[int32]described) map[int32]int64 {
	return column(rows, func(r described) int64 { return r.startOffset })
}

func stateEpochs(rows map[int32]described) map[int32]int64 {
	return column(rows, func(r described) int64 { return r.stateEpoch })
}

// column is one field of each partition's row.
func column(rows map[int32]described, field func(described) int64) map[int32]int64 {
	m := map[int32]int64{}
	for p, r := range rows {
		m[p] = field(r)
	}
	return m
}
