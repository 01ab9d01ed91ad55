//go:build kafka

package kafka

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// metadataInterval is how often the tests' sidecars read their broker's metadata: short, so that a
// test waits seconds, not the default 30 s, for two reads.
const metadataInterval = "--proxy-metadata-interval=5s"

// TestDeletedTopicLeavesNoState: Kafka removes a deleted topic's share state in its share
// coordinator, without a DeleteShareGroupState RPC, so the sidecars delete the topic's
// SharePartitionStates themselves once their brokers' metadata no longer lists it; another topic's
// stay, and so does the ShareGroup.
func TestDeletedTopicLeavesNoState(t *testing.T) {
	s := startSystem(t, systemOptions{sidecarArgs: []string{metadataInterval}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const partitions, records = 3, 300
	ordersID := produceOrders(ctx, t, s, partitions, records)
	refundsID, err := s.clients.Setup(ctx, "refunds", 1, 3, "refunds-processors")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.clients.Produce(ctx, "refunds", 100); err != nil {
		t.Fatal(err)
	}
	consumeAll(t, s, "orders-consumer", records)
	refunds, err := s.clients.StartConsumer("refunds-consumer", "refunds", "refunds-processors", 0, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(refunds.Stop)
	awaitAccepted(t, []*kafkacluster.Consumer{refunds}, 100, 5*time.Minute)
	refunds.Stop()
	awaitDeliveredUpTo(t, s.ns, ordersID, partitions, records/partitions)
	awaitDeliveredUpTo(t, s.ns, refundsID, 1, 100)

	if err := s.clients.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 2*time.Minute, func() error {
		if n := len(mustPartitionStates(t, s.ns, ordersID)); n != 0 {
			return fmt.Errorf("%d SharePartitionStates of the deleted topic orders left", n)
		}
		return nil
	})
	if n := len(mustPartitionStates(t, s.ns, refundsID)); n != 1 {
		t.Errorf("%d SharePartitionStates of refunds, want 1: another topic's state went too", n)
	}
	if deleted := sumSidecarMetric(t, s.cluster, "sharestate_deleted_topic_states_deleted_total"); deleted != partitions {
		t.Errorf("the sidecars deleted %v SharePartitionStates, want %d (each of orders' partitions once)", deleted, partitions)
	}
	var group sharestatev1.ShareGroup
	key := client.ObjectKey{Namespace: s.ns, Name: sharestatev1.ShareGroupName("orders-processors")}
	if err := suite.env.Client.Get(ctx, key, &group); err != nil {
		t.Errorf("the ShareGroup of orders-processors: %v (it is the user's, and stays)", err)
	}
	for _, n := range s.cluster.Nodes {
		if log := n.Sidecar.Log(); strings.Contains(log, "Deleted the share state of a topic that no longer exists") {
			t.Logf("%s's sidecar deleted some of orders' states", n.Name())
		}
	}
}

// TestBrokerBypassingTheProxyIsReported: node 2 advertises its real inter-broker listener instead of
// its proxy, so its peers reach it around the proxy and their share-state requests would go to
// Kafka's own persister. Its sidecar says so within a minute (an error log line naming both
// addresses, sharestate_proxy_bypassed 1, a ProxyBypassed event on its pod); the others do not.
func TestBrokerBypassingTheProxyIsReported(t *testing.T) {
	const bypassing = 2
	s := startSystem(t, systemOptions{noOperator: true, sidecarArgs: []string{metadataInterval}, bypassProxy: []int32{bypassing}})
	node := s.cluster.Node(bypassing)
	testenv.Eventually(t, time.Minute, func() error {
		if got := sidecarMetric(t, node.Sidecar, "sharestate_proxy_bypassed"); got != 1 {
			return fmt.Errorf("%s's sharestate_proxy_bypassed = %v, want 1", node.Name(), got)
		}
		return nil
	})
	wantLine := "The broker advertises another port than the proxy's for its inter-broker listener"
	log := node.Sidecar.Log()
	if !strings.Contains(log, wantLine) || !strings.Contains(log, `"advertised":"`+node.ReplicationAddress+`"`) ||
		!strings.Contains(log, `"advertisesUpstream":true`) {
		t.Errorf("%s's sidecar log has no error line naming %s as advertised:\n%s", node.Name(), node.ReplicationAddress, tail(log, 4000))
	}
	testenv.Eventually(t, time.Minute, func() error {
		if notes := proxyBypassedEvents(t, s.ns)[node.Name()]; len(notes) == 0 {
			return fmt.Errorf("no ProxyBypassed event on pod %s", node.Name())
		}
		return nil
	})
	for _, n := range s.cluster.Nodes {
		if n.ID == bypassing {
			continue
		}
		// Each of these has judged at least one answer that lists its broker.
		testenv.Eventually(t, time.Minute, func() error {
			if reads := sidecarMetric(t, n.Sidecar, `sharestate_proxy_metadata_reads_total{result="complete"}`) +
				sidecarMetric(t, n.Sidecar, `sharestate_proxy_metadata_reads_total{result="incomplete"}`); reads < 1 {
				return fmt.Errorf("%s's sidecar has read no metadata", n.Name())
			}
			return nil
		})
		if got := sidecarMetric(t, n.Sidecar, "sharestate_proxy_bypassed"); got != 0 {
			t.Errorf("%s advertises its proxy, yet sharestate_proxy_bypassed = %v", n.Name(), got)
		}
		if strings.Contains(n.Sidecar.Log(), wantLine) {
			t.Errorf("%s advertises its proxy, yet its sidecar reports a bypass", n.Name())
		}
	}
	events := proxyBypassedEvents(t, s.ns)
	delete(events, node.Name())
	if len(events) > 0 {
		t.Errorf("ProxyBypassed events on pods that advertise their proxy: %v", events)
	}
	t.Logf("%s's event: %s", node.Name(), proxyBypassedEvents(t, s.ns)[node.Name()][0])
}

// sidecarMetric is one sample of a sidecar's /metrics, named with its labels; 0 if absent.
func sidecarMetric(t *testing.T, sc *kafkacluster.Sidecar, sample string) float64 {
	t.Helper()
	page, err := sc.Metrics()
	if err != nil {
		t.Fatalf("scraping a sidecar: %v", err)
	}
	for line := range strings.Lines(page) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %v", sample, err)
			}
			return v
		}
	}
	return 0
}

// sumSidecarMetric sums a sample over every sidecar.
func sumSidecarMetric(t *testing.T, c *kafkacluster.Cluster, sample string) float64 {
	t.Helper()
	sum := 0.0
	for _, n := range c.Nodes {
		sum += sidecarMetric(t, n.Sidecar, sample)
	}
	return sum
}

// proxyBypassedEvents lists the notes of the ProxyBypassed events in ns, by the pod they regard.
func proxyBypassedEvents(t *testing.T, ns string) map[string][]string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notes := map[string][]string{}
	for _, e := range list.Items {
		if e.Reason == "ProxyBypassed" && e.Regarding.Kind == "Pod" {
			notes[e.Regarding.Name] = append(notes[e.Regarding.Name], e.Type+": "+e.Note)
		}
	}
	return notes
}
