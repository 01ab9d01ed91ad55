//go:build kafka

package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
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
// decodes. A request at a version neither serves is answered as the broker answers it: subtest
// "unsupported version".
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
	t.Run("unsupported version", func(t *testing.T) { checkUnsupportedVersionAsKafka(t, s) })
}

// checkUnsupportedVersionAsKafka sends a WriteShareGroupState one version above the highest the
// sidecar serves to the broker's own listener, to the sidecar and to its proxy. Kafka 4.4.0's broker
// closes such a connection without an answer (org.apache.kafka.network.Processor.parseRequestHeader
// throws UnsupportedVersionException and kafka.network.Processor.processCompletedReceives closes the
// channel on any exception from it: kafka-server and kafka_2.13 4.4.0, commit 1156b2752aaa28ea); the
// sidecar and the proxy must do the same, name the key and version in their logs and count the
// request as UNSUPPORTED_VERSION. A broker's persister meets UNSUPPORTED_VERSION before it sends:
// its NetworkClient picks a version from the ApiVersions answer, which the test above checks.
func checkUnsupportedVersionAsKafka(t *testing.T, s *system) {
	write, _ := kafkawire.LookupAPI(kafkawire.KeyWriteShareGroupState)
	version := write.MaxVersion + 1
	n := s.cluster.Nodes[0]
	targets := []struct{ who, addr string }{
		{"the broker itself", n.ClientAddress},
		{"the sidecar", n.Sidecar.DirectAddress},
		{"the proxy", n.Sidecar.ProxyAddress},
	}
	for _, target := range targets {
		answer, err := sendUnanswerable(target.addr, version)
		if err != nil {
			t.Errorf("%s: %v", target.who, err)
			continue
		}
		if answer != nil {
			t.Errorf("%s answered WriteShareGroupState v%d with %d bytes; Kafka's broker closes the connection", target.who, version, len(answer))
			continue
		}
		t.Logf("%s closed the connection on WriteShareGroupState v%d without an answer", target.who, version)
	}
	notServed := fmt.Sprintf("API key %d (WriteShareGroupState) version %d is not served", kafkawire.KeyWriteShareGroupState, version)
	if log := n.Sidecar.Log(); strings.Count(log, notServed) < 2 {
		t.Errorf("the sidecar's log names %q %d times, want 2 (sidecar and proxy)", notServed, strings.Count(log, notServed))
	}
	series := `sharestate_sidecar_requests_total{api="WriteShareGroupState",error="UNSUPPORTED_VERSION"}`
	if got := sidecarMetricSum(t, s.cluster, series); got < 2 {
		t.Errorf("%s = %v, want at least 2", series, got)
	}
}

// sendUnanswerable sends a WriteShareGroupState at version v to addr and returns what comes back
// before the connection closes: nil if it closes without a byte, an error if it stays open 30 s.
func sendUnanswerable(addr string, v int16) ([]byte, error) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.Version = v
	req.GroupID = "orders-processors"
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("sharestate-test")).AppendRequest(nil, req, 7)
	if _, err := conn.Write(frame); err != nil {
		return nil, err
	}
	answer, err := io.ReadAll(conn)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		return nil, fmt.Errorf("no answer and no close in 30 s after WriteShareGroupState v%d", v)
	}
	if len(answer) == 0 {
		return nil, nil // closed (EOF or reset), as Kafka's broker does
	}
	return answer, nil
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
