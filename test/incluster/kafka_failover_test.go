//go:build cluster

package incluster

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// kafkaPodDeleted: `kubectl delete pod kafka-1` while a share group consumes (SIGTERM, the broker's
// controlled shutdown): leadership moves, the StatefulSet recreates kafka-1 with a new UID, the
// operator fences nothing but what the old pod was still recorded as leading, and no acceptance is
// lost.
func (s *session) kafkaPodDeleted(t *testing.T) {
	logKafkaOnFailure(t)
	const topic, group, job, victim = "in-pods-failover", "in-pods-failover-consumers", "consume-failover", "kafka-1"
	shareTool(t, "setup", kafkaBootstrap, topic, strconv.Itoa(kafkaNodes), strconv.Itoa(kafkaNodes), group)
	shareTool(t, "produce", kafkaBootstrap, topic, strconv.Itoa(kafkaRecords))
	// Each poll's records are held 100 ms before they are acknowledged: the consumer is still at it
	// when the pod goes.
	startConsumerJob(t, job, topic, group, 30*time.Second, 100*time.Millisecond)
	waitAccepted(t, job, 2000)
	old := s.kafka[victim]
	deleted := time.Now()
	sh(t, "kubectl delete pod "+victim+" -n "+brokerNamespace+" --wait=false")
	s.kafka[victim] = readyPod(t, brokerNamespace, victim, string(old.UID), 5*time.Minute)
	t.Logf("%s was Ready again, a new pod, %.1fs after its deletion", victim, time.Since(deleted).Seconds())
	checkAcceptanceKept(t, jobOutcomes(t, job), endOffsets(t, topic))
	checkFencedOnlyFrom(t, group, map[string]bool{string(old.UID): true})
	checkLeadersRecorded(t, s.kafka, topic, group)
	checkShareGroupStateEmpty(t)
}

// checkAcceptanceKept fails t when a record was never accepted, or was accepted and then delivered
// again at a higher delivery count (an acceptance lost), or was delivered but never produced. A
// record accepted twice at one delivery count is Kafka's, not a loss: the batch in flight at a
// leader's end was acquired but its acquisition never stored, and the new leader hands it out again
// (docs/kafka-integration.md §7, the rolling restart); those are logged.
func checkAcceptanceKept(t *testing.T, outcomes []kafkacluster.Outcome, ends map[int32]int64) {
	t.Helper()
	type key struct {
		partition int32
		offset    int64
	}
	counts := map[key]map[int]int{} // delivery count -> acceptances
	unknown := map[key]bool{}
	for _, o := range outcomes {
		k := key{o.Partition, o.Offset}
		if end, ok := ends[o.Partition]; !ok || o.Offset >= end {
			t.Errorf("%d:%d was delivered but never produced", o.Partition, o.Offset)
		}
		switch o.Action {
		case "ACCEPTED":
			if counts[k] == nil {
				counts[k] = map[int]int{}
			}
			counts[k][o.DeliveryCount]++
		case "FAILED-ACCEPTED":
			unknown[k] = true
		}
	}
	var problems []string
	twice := 0
	for p, end := range ends {
		for off := range end {
			k := key{p, off}
			switch c := counts[k]; {
			case len(c) == 0 && !unknown[k]:
				problems = append(problems, fmt.Sprintf("%d:%d never accepted", p, off))
			case len(c) > 1:
				problems = append(problems, fmt.Sprintf("%d:%d accepted and delivered again at a later count (%v)", p, off, c))
			case len(c) == 1 && maxAcceptances(c) > 1:
				twice++
			}
		}
	}
	t.Logf("records accepted twice at one delivery count (the batches in flight at the leader changes): %d", twice)
	if len(problems) > 0 {
		t.Fatalf("%d problems; the first: %s", len(problems), strings.Join(problems[:min(10, len(problems))], "; "))
	}
}

func maxAcceptances(byCount map[int]int) int {
	m := 0
	for _, n := range byCount {
		m = max(m, n)
	}
	return m
}

// checkFencedOnlyFrom fails t when a partition of group is fenced from any leader but the pods of
// the UIDs gone: the operator fences a pod that is gone, never a live leader. It logs which it fenced.
func checkFencedOnlyFrom(t *testing.T, group string, gone map[string]bool) {
	t.Helper()
	var fenced []int32
	for _, sps := range groupPartitionStates(t, group) {
		f := sps.Status.FencedLeader
		switch {
		case f != nil && !gone[f.PodUID]:
			t.Errorf("partition %d was fenced from %s/%s, a pod that was not deleted", sps.Spec.Partition, f.PodName, f.PodUID)
		case f != nil:
			fenced = append(fenced, sps.Spec.Partition)
		}
		if c := fencedCondition(&sps); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("partition %d is still fenced: its new leader has not taken it", sps.Spec.Partition)
		}
	}
	t.Logf("partitions fenced from the deleted pods: %v", fenced)
}

// fencedCondition is the SharePartitionState's Fenced condition, nil when it has none.
func fencedCondition(sps *sharestatev1.SharePartitionState) *metav1.Condition {
	return apimeta.FindStatusCondition(sps.Status.Conditions, sharestatev1.ConditionFenced)
}
