package main_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The sidecar's broker in these tests is node 1 of a two-broker kfake cluster (the helpers' default
// broker id), so that node 0 is a peer whose address does not matter.

// startUpstream starts a two-broker kfake cluster with the topics orders and __share_group_state.
// With advertiseProxy, node 1 advertises proxy, as advertised.listeners would; else its real
// address. It returns node 1's real address and the id of orders.
func startUpstream(t *testing.T, proxy string, advertiseProxy bool) (upstream string, orders sharestatev1.TopicID) {
	t.Helper()
	calls := 0
	listen := func(network, _ string) (net.Listener, error) {
		ln, err := net.Listen(network, "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		calls++
		if calls == 2 {
			upstream = ln.Addr().String()
			if advertiseProxy {
				return advertised{Listener: ln, proxy: proxy}, nil
			}
		}
		return ln, nil
	}
	cluster, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.ListenFn(listen), kfake.SeedTopics(2, "orders", "__share_group_state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	return upstream, topicID(t, upstream, "orders")
}

// topicID asks the broker at addr for a topic's id, with franz-go's client.
func topicID(t *testing.T, addr, topic string) sharestatev1.TopicID {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := kmsg.NewPtrMetadataRequest()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range resp.Topics {
		if tp.Topic != nil && *tp.Topic == topic {
			return sharestatev1.TopicID(sharestate.TopicID(tp.TopicID).String())
		}
	}
	t.Fatalf("no topic %s in the metadata", topic)
	return ""
}

// createPartitionState creates a SharePartitionState of group g.
func createPartitionState(t *testing.T, ns string, topic sharestatev1.TopicID, partition int32) *sharestatev1.SharePartitionState {
	t.Helper()
	s := &sharestatev1.SharePartitionState{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.SharePartitionStateName("g", string(topic), partition)},
		Spec:       sharestatev1.SharePartitionStateSpec{GroupID: "g", TopicID: topic, Partition: partition},
	}
	if err := env.Client.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func randomTopicID() sharestatev1.TopicID {
	var id sharestate.TopicID
	_, _ = rand.Read(id[:])
	return sharestatev1.TopicID(id.String())
}

// proxyBypassedEvents lists the ProxyBypassed events of ns.
func proxyBypassedEvents(t *testing.T, ns string) []string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, e := range list.Items {
		if e.Reason == "ProxyBypassed" {
			notes = append(notes, fmt.Sprintf("%s %s/%s: %s", e.Type, e.Regarding.Kind, e.Regarding.Name, e.Note))
		}
	}
	return notes
}

// TestProxyBypassedAndDeletedTopics runs the sidecar in proxy mode in front of a kfake broker that
// advertises its real address, not the proxy's: the sidecar reports it (log line, metric, Warning
// event on its pod), and deletes the SharePartitionStates of a topic id the broker does not know,
// every partition of it, while those of a topic it knows stay.
func TestProxyBypassedAndDeletedTopics(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	proxy := freeAddr(t)
	upstream, orders := startUpstream(t, proxy, false)
	kept := createPartitionState(t, ns, orders, 0)
	deleted := randomTopicID()
	createPartitionState(t, ns, deleted, 0)
	createPartitionState(t, ns, deleted, 1)

	s := startSidecar(t, ns, sidecarOptions{args: []string{"--proxy-listen-address=" + proxy,
		"--proxy-upstream-address=" + upstream, "--proxy-metadata-interval=200ms"}})

	testenv.Eventually(t, 30*time.Second, func() error {
		var list sharestatev1.SharePartitionStateList
		if err := env.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 1 || list.Items[0].UID != kept.UID {
			return fmt.Errorf("%d SharePartitionStates, want only orders' (%s)", len(list.Items), kept.Name)
		}
		return nil
	})
	s.eventuallyMetric(t, "sharestate_deleted_topic_states_deleted_total", "2")
	s.eventuallyMetric(t, "sharestate_proxy_bypassed", "1")
	_, proxyPort, _ := net.SplitHostPort(proxy)
	testenv.Eventually(t, 30*time.Second, func() error {
		notes := proxyBypassedEvents(t, ns)
		if len(notes) == 0 {
			return fmt.Errorf("no ProxyBypassed event")
		}
		want := fmt.Sprintf("Warning Pod/broker-1: Broker 1 advertises %s for its inter-broker listener, not the proxy's port %s", upstream, proxyPort)
		if !strings.HasPrefix(notes[0], want) {
			return fmt.Errorf("event %q, want it to start %q", notes[0], want)
		}
		return nil
	})
	logs := s.logs.String()
	if !strings.Contains(logs, "The broker advertises another port than the proxy's") || !strings.Contains(logs, `"advertisesUpstream":true`) {
		t.Errorf("no error line naming the bypass in the sidecar's log:\n%s", logs)
	}
	for _, p := range []int32{0, 1} {
		if !strings.Contains(logs, `"topicId":"`+string(deleted)+`","topicName":"","partition":`+strconv.Itoa(int(p))) {
			t.Errorf("no log line of partition %d's deletion", p)
		}
	}
}

// TestProxyAdvertised: a broker that advertises the proxy is not reported, and no state is deleted
// while every topic exists.
func TestProxyAdvertised(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	proxy := freeAddr(t)
	upstream, orders := startUpstream(t, proxy, true)
	kept := createPartitionState(t, ns, orders, 0)

	s := startSidecar(t, ns, sidecarOptions{args: []string{"--proxy-listen-address=" + proxy,
		"--proxy-upstream-address=" + upstream, "--proxy-metadata-interval=200ms"}})
	// Three complete reads: two decide deletions, and a bypass is reported at the first.
	testenv.Eventually(t, 30*time.Second, func() error {
		got := s.metric(t, `sharestate_proxy_metadata_reads_total{result="complete"}`)
		if n, _ := strconv.Atoi(got); n < 3 {
			return fmt.Errorf("%q complete metadata reads, want 3", got)
		}
		return nil
	})
	if got := s.metric(t, "sharestate_proxy_bypassed"); got != "0" {
		t.Errorf("sharestate_proxy_bypassed = %q, want 0", got)
	}
	if notes := proxyBypassedEvents(t, ns); len(notes) > 0 {
		t.Errorf("ProxyBypassed events: %v", notes)
	}
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(kept), kept); apierrors.IsNotFound(err) {
		t.Error("the state of an existing topic was deleted")
	} else if err != nil {
		t.Fatal(err)
	}
}
