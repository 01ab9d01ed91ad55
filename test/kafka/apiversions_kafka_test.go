//go:build kafka

package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestApiVersionsThroughTheProxy: every ApiVersions answer a real broker gives through its proxy, at
// every version, lists keys 83–87 at exactly the versions the sidecar serves (Write and ReadSummary
// v1 carry DeliveryCompleteCount), beside the broker's own APIs; and the version the broker's
// persister will send for each, the lower of its own highest and the sidecar's, is one the sidecar
// decodes.
func TestApiVersionsThroughTheProxy(t *testing.T) {
	s := startSystem(t, systemOptions{noOperator: true})
	for _, n := range s.cluster.Nodes {
		own := apiVersions(t, n.ReplicationAddress, 3)
		for v := range int16(5) {
			through := apiVersions(t, n.Sidecar.ProxyAddress, v)
			if _, ok := through[0]; !ok {
				t.Errorf("%s, ApiVersions v%d through the proxy: no Produce: not the broker's answer", n.Name(), v)
			}
			for _, api := range kafkawire.APIs {
				if api.Key == kafkawire.KeyAPIVersions {
					continue
				}
				got, ok := through[api.Key]
				if !ok || got.MinVersion != api.MinVersion || got.MaxVersion != api.MaxVersion {
					t.Errorf("%s, ApiVersions v%d through the proxy: key %d at %+v, want v%d–v%d",
						n.Name(), v, api.Key, got, api.MinVersion, api.MaxVersion)
				}
				if v != 3 {
					continue
				}
				brokers, ok := own[api.Key]
				if !ok {
					t.Errorf("%s's own ApiVersions lists no key %d: its persister cannot send it", n.Name(), api.Key)
					continue
				}
				if sent := min(brokers.MaxVersion, api.MaxVersion); !api.Supports(sent) {
					t.Errorf("%s sends key %d at v%d, which the sidecar does not decode", n.Name(), api.Key, sent)
				} else {
					t.Logf("%s: key %d, the broker's highest v%d, the sidecar's v%d: sent at v%d", n.Name(), api.Key, brokers.MaxVersion, api.MaxVersion, sent)
				}
			}
		}
	}
}

// apiVersions asks addr for its ApiVersions at version v and returns its APIs by key.
func apiVersions(t *testing.T, addr string, v int16) map[int16]kmsg.ApiVersionsResponseApiKey {
	t.Helper()
	apis, err := tryAPIVersions(addr, v)
	if err != nil {
		t.Fatal(err)
	}
	return apis
}

// tryAPIVersions asks addr for its ApiVersions at version v and returns its APIs by key, or why it got
// no answer.
func tryAPIVersions(addr string, v int16) (map[int16]kmsg.ApiVersionsResponseApiKey, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = v
	req.ClientSoftwareName, req.ClientSoftwareVersion = "sharestate-test", "1"
	if _, err := conn.Write(kmsg.NewRequestFormatter(kmsg.FormatterClientID("sharestate-test")).AppendRequest(nil, req, 1)); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return nil, fmt.Errorf("ApiVersions v%d at %s: %w", v, addr, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.Version = v
	// The ApiVersions response header is version 0 at every version: the correlation id alone.
	if err := resp.ReadFrom(body[4:]); err != nil {
		return nil, fmt.Errorf("decoding ApiVersions v%d from %s: %w", v, addr, err)
	}
	if resp.ErrorCode != 0 {
		return nil, fmt.Errorf("ApiVersions v%d at %s: error code %d", v, addr, resp.ErrorCode)
	}
	out := map[int16]kmsg.ApiVersionsResponseApiKey{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = k
	}
	return out, nil
}

// TestProxyWhileItsBrokerIsDown: a proxy whose broker is down answers nothing it cannot (an
// ApiVersions, which is the broker's to answer, gets no answer), and serves again once the broker is
// back; the cluster then has every replica in sync.
func TestProxyWhileItsBrokerIsDown(t *testing.T) {
	s := startSystem(t, systemOptions{noOperator: true})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	produceOrders(ctx, t, s, 3, 3000)
	n := s.cluster.Nodes[2]
	n.Stop()
	if apis, err := tryAPIVersions(n.Sidecar.ProxyAddress, 3); err == nil {
		t.Fatalf("the proxy of the stopped %s answered ApiVersions with %d APIs", n.Name(), len(apis))
	} else {
		t.Logf("the proxy of the stopped %s: %v", n.Name(), err)
	}
	if err := n.Restart(3 * time.Minute); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, time.Minute, func() error {
		_, err := tryAPIVersions(n.Sidecar.ProxyAddress, 3)
		return err
	})
	awaitInSync(ctx, t, s, "orders", 3)
	if !n.Sidecar.Running() {
		t.Errorf("%s's sidecar stopped with its broker", n.Name())
	}
}
