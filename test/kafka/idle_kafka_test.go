//go:build kafka

package kafka

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// TestIdleUpstreamKeepsThePersistersConnection: a broker closes an inter-broker connection idle for
// connections.max.idle.ms; on a persister's connection through the proxy the upstream half carries
// nothing (the proxy answers every request), so the broker closes it while share-state traffic flows.
// The proxy keeps the persister's connection: with a 6 s idle time and acknowledgements every second
// for longer than that, no proxied connection closes for its upstream, and every record is accepted
// once with no commit failing.
func TestIdleUpstreamKeepsThePersistersConnection(t *testing.T) {
	s := startSystem(t, systemOptions{noOperator: true, brokerConfig: map[string]string{"connections.max.idle.ms": "6000"}})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const records = 6000
	produceOrders(ctx, t, s, 3, records)
	c, err := s.clients.StartConsumerWith("consumer", "orders", "orders-processors",
		kafkacluster.ConsumerOptions{Idle: 2 * time.Minute, AckDelay: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	awaitAccepted(t, []*kafkacluster.Consumer{c}, records, 5*time.Minute)
	c.Stop()
	l, failures := collect(t, []*kafkacluster.Consumer{c})
	if len(failures) > 0 {
		t.Errorf("%d acknowledgements failed, the first: %s", len(failures), failures[0])
	}
	checkExactlyOnce(t, l, 3, records/3)
	ends := sidecarMetricSum(t, s.cluster, `sharestate_proxy_upstream_idle_ends_total`)
	closed := sidecarMetricSum(t, s.cluster, `sharestate_proxy_connections_closed_total{reason="upstream_closed"}`)
	t.Logf("upstreams the brokers closed idle, their downstream kept: %v; connections closed with their upstream: %v", ends, closed)
	if ends == 0 {
		t.Error("no broker closed an idle upstream: the test did not reach the case")
	}
	if closed != 0 {
		t.Errorf("%v proxied connections closed with their upstream", closed)
	}
}

// TestKafkasOwnPersister is the baseline mode of the cluster package: without sidecars the brokers
// keep share-group state in __share_group_state, as Kafka does, and consume the same way.
func TestKafkasOwnPersister(t *testing.T) {
	s := startSystem(t, systemOptions{noSidecars: true, noOperator: true})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const records = 3000
	produceOrders(ctx, t, s, 3, records)
	c, err := s.clients.StartConsumer("consumer", "orders", "orders-processors", 0, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	awaitAccepted(t, []*kafkacluster.Consumer{c}, records, 5*time.Minute)
	c.Stop()
	l, _ := collect(t, []*kafkacluster.Consumer{c})
	checkExactlyOnce(t, l, 3, records/3)
	var bytes int64
	for _, n := range s.cluster.Nodes {
		segments, _ := filepath.Glob(filepath.Join(n.DataDir(), "__share_group_state-*", "*.log"))
		for _, seg := range segments {
			if info, err := os.Stat(seg); err == nil {
				bytes += info.Size()
			}
		}
	}
	if bytes == 0 {
		t.Fatal("__share_group_state holds nothing: the brokers did not use Kafka's own persister")
	}
	t.Logf("__share_group_state: %d bytes on the brokers", bytes)
}
