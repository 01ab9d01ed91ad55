//go:build kafka

package kafka

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// produceOrders creates the topic orders with partitions (replication factor 3), points the group
// orders-processors at its earliest offset, and produces records to it; it returns the topic's id.
func produceOrders(ctx context.Context, t *testing.T, s *system, partitions, records int) string {
	t.Helper()
	topicID, err := s.clients.Setup(ctx, "orders", partitions, 3, "orders-processors")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.clients.Produce(ctx, "orders", records); err != nil {
		t.Fatal(err)
	}
	return topicID
}

// record is a partition and offset.
type record struct {
	partition int32
	offset    int64
}

// ledger is every outcome the consumers committed, by record.
type ledger map[record][]kafkacluster.Outcome

// collect reads every consumer's outcomes so far.
func collect(t *testing.T, consumers []*kafkacluster.Consumer) (ledger, []string) {
	t.Helper()
	l := ledger{}
	var failures []string
	for _, c := range consumers {
		outs, fails, err := c.Outcomes()
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		for _, o := range outs {
			r := record{o.Partition, o.Offset}
			l[r] = append(l[r], o)
		}
		failures = append(failures, fails...)
	}
	return l, failures
}

// accepted counts the records accepted at least once: with a commit that succeeded, or one that
// failed, whose outcome the consumer cannot know (see checkExactlyOnce).
func (l ledger) accepted() int {
	n := 0
	for _, outs := range l {
		for _, o := range outs {
			if o.Action == "ACCEPTED" || o.Action == "FAILED-ACCEPTED" {
				n++
				break
			}
		}
	}
	return n
}

// awaitAccepted waits until want records have been accepted, or fails after timeout with what is
// missing.
func awaitAccepted(t *testing.T, consumers []*kafkacluster.Consumer, want int, timeout time.Duration) ledger {
	t.Helper()
	var l ledger
	err := testenv.Poll(timeout, func() error {
		l, _ = collect(t, consumers)
		if n := l.accepted(); n < want {
			return fmt.Errorf("%d of %d records accepted", n, want)
		}
		return nil
	})
	if err != nil {
		for _, c := range consumers {
			t.Logf("consumer %s (running %v) log ends:\n%s", c.Name, c.Running(), tail(c.Log(), 2000))
		}
		t.Fatal(err)
	}
	return l
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// checkExactlyOnce checks that every record of partitions × perPartition was accepted, none twice,
// and that nothing outside them was delivered. An acceptance whose commit failed counts for "accepted"
// but not for "twice": its outcome is unknown to the consumer (the leader may have stored it and died
// before answering; then the record is rightly never delivered again), and if it was not stored the
// record is delivered again and accepted once more.
func checkExactlyOnce(t *testing.T, l ledger, partitions int32, perPartition int64) {
	t.Helper()
	var problems []string
	for p := range partitions {
		for o := range perPartition {
			n, unknown := 0, 0
			for _, out := range l[record{p, o}] {
				switch out.Action {
				case "ACCEPTED":
					n++
				case "FAILED-ACCEPTED":
					unknown++
				}
			}
			if n > 1 || n+unknown == 0 {
				problems = append(problems, fmt.Sprintf("%d:%d accepted %d times (%v)", p, o, n, l[record{p, o}]))
			}
		}
	}
	for r := range l {
		if r.partition >= partitions || r.offset >= perPartition {
			problems = append(problems, fmt.Sprintf("%d:%d was delivered but never produced", r.partition, r.offset))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Fatalf("%d records not accepted exactly once; the first: %s", len(problems), strings.Join(problems[:min(10, len(problems))], "; "))
	}
}

// awaitDeliveredUpTo waits until every SharePartitionState of the topic in ns says that every record
// before want is delivered: its start offset is want, or its batches from the start offset up to want
// are all acknowledged or archived. Kafka's share-partition leader moves its start offset past
// acknowledged records after the Write that acknowledged them, so the stored start offset of a
// partition that received nothing since stays at the first offset of its last acknowledged batch.
func awaitDeliveredUpTo(t *testing.T, ns, topicID string, partitions int, want int64) {
	t.Helper()
	testenv.Eventually(t, 2*time.Minute, func() error {
		states, err := partitionStates(ns, topicID)
		if err != nil {
			return err
		}
		if len(states) != partitions {
			return fmt.Errorf("%d SharePartitionStates of topic %s, want %d", len(states), topicID, partitions)
		}
		for _, s := range states {
			got, err := deliveredUpTo(s.Status)
			if err != nil {
				return err
			}
			if got != want {
				return fmt.Errorf("partition %d: delivered up to %d, want %d (start offset %d, batches %v)",
					s.Spec.Partition, got, want, s.Status.StartOffset, s.Status.StateBatches)
			}
		}
		return nil
	})
}

// deliveredUpTo is the first offset of the state whose delivery is not complete.
func deliveredUpTo(st sharestatev1.SharePartitionStateStatus) (int64, error) {
	stored := make([]string, len(st.StateBatches))
	for i, b := range st.StateBatches {
		stored[i] = string(b)
	}
	batches, err := sharestate.DecodeBatches(stored)
	if err != nil {
		return 0, err
	}
	next := st.StartOffset
	for _, b := range batches {
		if b.LastOffset < next {
			continue
		}
		done := b.DeliveryState == sharestate.DeliveryStateAcknowledged || b.DeliveryState == sharestate.DeliveryStateArchived
		if b.FirstOffset > next || !done {
			break
		}
		next = b.LastOffset + 1
	}
	return next, nil
}

// partitionStates lists the SharePartitionStates of topicID in ns.
func partitionStates(ns, topicID string) ([]sharestatev1.SharePartitionState, error) {
	var list sharestatev1.SharePartitionStateList
	if err := suite.env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var out []sharestatev1.SharePartitionState
	for _, s := range list.Items {
		if string(s.Spec.TopicID) == topicID {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Partition < out[j].Spec.Partition })
	return out, nil
}

// checkNoStateInKafka checks that no broker holds a byte of __share_group_state: every segment of
// every partition of it on every node is empty (its log end offset is 0), if the topic exists at all.
func checkNoStateInKafka(t *testing.T, c *kafkacluster.Cluster) {
	t.Helper()
	segments := 0
	for _, n := range c.Nodes {
		logs, err := filepath.Glob(filepath.Join(n.DataDir(), "__share_group_state-*", "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		for _, seg := range logs {
			segments++
			info, err := os.Stat(seg)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size() != 0 {
				t.Errorf("%s holds %d bytes: share state went to Kafka", seg, info.Size())
			}
		}
	}
	t.Logf("__share_group_state: %d segments on the brokers, all empty", segments)
}

// shareStateRequests sums, over every sidecar, the share-state requests the proxies answered, by API.
func shareStateRequests(t *testing.T, c *kafkacluster.Cluster) map[string]float64 {
	t.Helper()
	sums := map[string]float64{}
	for _, api := range []string{"InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
		"DeleteShareGroupState", "ReadShareGroupStateSummary"} {
		sums[api] = sidecarMetricSum(t, c, `sharestate_proxy_requests_total{api="`+api+`",route="answered"}`)
	}
	return sums
}

// sidecarMetricSum sums a metric's samples (name with its labels, as /metrics prints them) over
// every sidecar.
func sidecarMetricSum(t *testing.T, c *kafkacluster.Cluster, series string) float64 {
	t.Helper()
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(series) + ` ([0-9.e+]+)$`)
	sum := 0.0
	for _, n := range c.Nodes {
		page, err := n.Sidecar.Metrics()
		if err != nil {
			t.Fatalf("scraping %s's sidecar: %v", n.Name(), err)
		}
		for line := range strings.Lines(page) {
			if m := re.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
				v, _ := strconv.ParseFloat(m[1], 64)
				sum += v
			}
		}
	}
	return sum
}
