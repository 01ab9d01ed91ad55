package kafkawire

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// TestFetchMetadataFromKfake reads a three-broker kfake cluster's metadata: every broker with the
// address it listens on, every topic with its id, and the cluster id.
func TestFetchMetadataFromKfake(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.ClusterID("test-cluster"), kfake.SeedTopics(2, "orders", "events"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := FetchMetadata(ctx, MetadataOptions{Address: cluster.ListenAddrs()[1]})
	if err != nil {
		t.Fatal(err)
	}
	if md.ClusterID != "test-cluster" {
		t.Errorf("cluster id %q", md.ClusterID)
	}
	want := map[int32]string{}
	for i, addr := range cluster.ListenAddrs() {
		want[int32(i)] = addr
	}
	for _, b := range md.Brokers {
		if got := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); got != want[b.NodeID] {
			t.Errorf("broker %d at %s, want %s", b.NodeID, got, want[b.NodeID])
		}
		delete(want, b.NodeID)
	}
	if len(want) > 0 {
		t.Errorf("brokers missing: %v", want)
	}
	names := map[string]bool{}
	for _, topic := range md.Topics {
		if topic.ID.IsZero() || topic.ErrorCode != 0 {
			t.Errorf("topic %q: id %s, error code %d", topic.Name, topic.ID, topic.ErrorCode)
		}
		names[topic.Name] = true
	}
	if !names["orders"] || !names["events"] || len(names) != 2 {
		t.Errorf("topics %v, want orders and events", names)
	}
}

// TestFetchMetadataRefusesOldVersions: a broker that speaks Metadata only below v12 gives no topic
// ids in a request for all topics; the fetch fails rather than return topics without them.
func TestFetchMetadataRefusesOldVersions(t *testing.T) {
	versions := kversion.Stable()
	versions.SetMaxKeyVersion(KeyMetadata, 11)
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.MaxVersions(versions), kfake.SeedTopics(1, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := FetchMetadata(ctx, MetadataOptions{Address: cluster.ListenAddrs()[0]})
	if err == nil || !strings.Contains(err.Error(), "at least v12 needed") {
		t.Fatalf("Metadata below v12: got %+v, %v; want refused for the version", md, err)
	}
}

// TestMetadataVersion picks the highest version both sides speak, from v12 on.
func TestMetadataVersion(t *testing.T) {
	ours := kmsg.NewPtrMetadataRequest().MaxVersion()
	for _, tc := range []struct {
		name     string
		keys     []kmsg.ApiVersionsResponseApiKey
		want     int16
		refusing bool
	}{
		{"the broker's top below ours", []kmsg.ApiVersionsResponseApiKey{{ApiKey: KeyMetadata, MinVersion: 0, MaxVersion: 12}}, 12, false},
		{"ours below the broker's top", []kmsg.ApiVersionsResponseApiKey{{ApiKey: KeyMetadata, MinVersion: 0, MaxVersion: ours + 5}}, ours, false},
		{"below v12 only", []kmsg.ApiVersionsResponseApiKey{{ApiKey: KeyMetadata, MinVersion: 0, MaxVersion: 11}}, 0, true},
		{"above ours only", []kmsg.ApiVersionsResponseApiKey{{ApiKey: KeyMetadata, MinVersion: ours + 1, MaxVersion: ours + 2}}, 0, true},
		{"no Metadata at all", []kmsg.ApiVersionsResponseApiKey{{ApiKey: KeyAPIVersions, MaxVersion: 4}}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := metadataVersion(tc.keys)
			if (err != nil) != tc.refusing || got != tc.want {
				t.Errorf("got v%d, %v; want v%d, refused %v", got, err, tc.want, tc.refusing)
			}
		})
	}
}
