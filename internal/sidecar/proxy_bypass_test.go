package sidecar

import (
	"testing"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

func TestCheckAdvertised(t *testing.T) {
	const proxyPort, upstreamPort = 9091, 19091
	brokers := func(own kafkawire.BrokerAddress) *kafkawire.ClusterMetadata {
		return &kafkawire.ClusterMetadata{Brokers: []kafkawire.BrokerAddress{
			{NodeID: 0, Host: "kafka-0.kafka", Port: upstreamPort}, // a peer's address is not this sidecar's concern
			own,
			{NodeID: 2, Host: "kafka-2.kafka", Port: proxyPort},
		}}
	}
	for _, tc := range []struct {
		name string
		md   *kafkawire.ClusterMetadata
		want advertisedVerdict
	}{
		{"the proxy's port, under a DNS name", brokers(kafkawire.BrokerAddress{NodeID: 1, Host: "kafka-1.kafka.svc", Port: proxyPort}), advertisedProxy},
		{"the proxy's port, under another host: only the port is compared",
			brokers(kafkawire.BrokerAddress{NodeID: 1, Host: "10.0.0.7", Port: proxyPort}), advertisedProxy},
		{"the upstream's port", brokers(kafkawire.BrokerAddress{NodeID: 1, Host: "127.0.0.1", Port: upstreamPort}), advertisedBypass},
		{"any other port", brokers(kafkawire.BrokerAddress{NodeID: 1, Host: "kafka-1.kafka.svc", Port: 9092}), advertisedBypass},
		{"the broker is not listed", &kafkawire.ClusterMetadata{Brokers: []kafkawire.BrokerAddress{{NodeID: 2, Port: proxyPort}}}, advertisedUnknown},
		{"no broker at all", &kafkawire.ClusterMetadata{}, advertisedUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, addr := checkAdvertised(tc.md, 1, proxyPort)
			if got != tc.want {
				t.Fatalf("verdict %d, want %d", got, tc.want)
			}
			if got != advertisedUnknown && addr.NodeID != 1 {
				t.Errorf("judged broker %d's address, want broker 1's", addr.NodeID)
			}
		})
	}
}
