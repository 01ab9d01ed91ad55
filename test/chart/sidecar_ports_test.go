package chart_test

import (
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/sharestate/sharestate-operator/internal/sidecar"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
)

// brokerPodPorts are the ports a broker pod's own processes take, by Strimzi or by the Apache Kafka
// image. The sidecar shares the pod's network, so it must bind none of them. The sources, each read
// at a commit, are in docs/kafka-integration.md, "The sidecar's ports".
var brokerPodPorts = map[int]string{
	8080: "Strimzi's Kafka agent, HTTP on localhost (KafkaAgent.java, HTTP_PORT)",
	8443: "Strimzi's Kafka agent, HTTPS (KafkaAgent.java, HTTPS_PORT)",
	9090: "Strimzi's control-plane listener (KafkaCluster.java, CONTROLPLANE_PORT)",
	9091: "Strimzi's replication listener (KafkaCluster.java, REPLICATION_PORT)",
	9092: "the Apache Kafka image's PLAINTEXT listener; Strimzi's plain listener in its examples",
	9093: "the Apache Kafka image's CONTROLLER listener; Strimzi's TLS listener in its examples",
	9094: "Strimzi's external listener in its examples",
	9404: "Strimzi's Prometheus metrics, JMX exporter or metrics reporter (MetricsModel.METRICS_PORT)",
	9999: "Strimzi's JMX (JmxModel.JMX_PORT)",
}

// strimziLowestListenerPort is the lowest port Strimzi lets a user's listener take
// (ListenersValidator.LOWEST_ALLOWED_PORT_NUMBER): below it, no listener a Strimzi user configures
// can collide with the sidecar.
const strimziLowestListenerPort = 9092

// The sidecar's default ports collide with no port of a Strimzi or Apache Kafka broker pod, and sit
// below every port a Strimzi user may give a listener: with secure metrics, with plain metrics, and
// in proxy mode, whose own port is the one exception (see sidecarBinds).
func TestSidecarPortsAvoidBrokerPorts(t *testing.T) {
	for _, tc := range []struct{ name, values string }{
		{"defaults", ""},
		{"plain metrics", "sidecar: {metricsSecure: false}"},
		{"proxy mode", "sidecar: {proxy: {enabled: true}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, "--set", "sidecar.example.enabled=true", "-f", valuesFile(t, tc.values))
			c := decode[corev1.PodTemplate](t, ms.only(t, "PodTemplate")).Template.Spec.InitContainers[0]
			binds := sidecarBinds(t, c)
			if len(binds) != 3 { // the Kafka protocol, health, metrics
				t.Fatalf("the sidecar binds %v, want its three ports (args %q)", binds, c.Args)
			}
			for port, what := range binds {
				if owner, taken := brokerPodPorts[port]; taken {
					t.Errorf("%s on port %d, which is %s", what, port, owner)
				}
				if port >= strimziLowestListenerPort {
					t.Errorf("%s on port %d, where a Strimzi user may put a listener (from %d up)", what, port, strimziLowestListenerPort)
				}
			}
		})
	}
}

// The chart's sidecar listens where the binary does by default, so the check above covers the
// binary's defaults too, and a user who runs the sidecar without the chart gets the same ports.
func TestSidecarChartPortsAreTheBinarys(t *testing.T) {
	for _, tc := range []struct {
		values string
		want   []string
	}{
		{"", []string{"--listen-address=" + kafkawire.DefaultAddress, "--health-probe-bind-address=" + sidecar.DefaultHealthProbeBindAddress,
			"--metrics-bind-address=" + sidecar.DefaultSecureMetricsAddress}},
		{"sidecar: {metricsSecure: false}", []string{"--metrics-bind-address=" + sidecar.DefaultPlainMetricsAddress}},
	} {
		ms := render(t, "--set", "sidecar.example.enabled=true", "-f", valuesFile(t, tc.values))
		c := decode[corev1.PodTemplate](t, ms.only(t, "PodTemplate")).Template.Spec.InitContainers[0]
		for _, arg := range tc.want {
			if !slices.Contains(c.Args, arg) {
				t.Errorf("values %q: args %q lack the binary's default %s", tc.values, c.Args, arg)
			}
		}
	}
}

// sidecarBinds are the ports the sidecar container binds, from its address flags and its container
// ports, each with the flag or port name that binds it. The proxy's port is left out: in proxy mode
// it is by design the port the broker advertises for its inter-broker listener, whose real listener
// moves to loopback on another port (docs/kafka-integration.md, section 3), so it is the broker's
// port taken over, not one beside the broker's.
func sidecarBinds(t *testing.T, c corev1.Container) map[int]string {
	t.Helper()
	binds := map[int]string{}
	for _, arg := range c.Args {
		name, addr, ok := strings.Cut(arg, "=")
		if !ok || !strings.HasSuffix(name, "-address") || name == "--proxy-listen-address" || name == "--proxy-upstream-address" {
			continue
		}
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		binds[n] = name
	}
	for _, p := range c.Ports {
		if p.Name == "sstate-proxy" {
			continue
		}
		if _, bound := binds[int(p.ContainerPort)]; !bound {
			t.Errorf("container port %s (%d) is bound by no address flag: %q", p.Name, p.ContainerPort, c.Args)
		}
	}
	return binds
}
