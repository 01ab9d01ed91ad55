package chart_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// TestSidecarProxyMode renders the sidecar in proxy mode through templates/sidecar-example.yaml:
// the proxy's flags, its container port (the one the broker advertises for its inter-broker
// listener), and the TLS files from the volume the values name, mounted read-only.
func TestSidecarProxyMode(t *testing.T) {
	const tlsDir = "/etc/sharestate/proxy-tls"
	for _, tc := range []struct {
		name       string
		values     string
		wantArgs   []string
		wantVolume string // the TLS volume mounted at tlsDir; empty: none
	}{
		{
			name:     "plain",
			values:   "sidecar: {proxy: {enabled: true}}",
			wantArgs: []string{"--proxy-listen-address=:9091", "--proxy-upstream-address=127.0.0.1:19091"},
		},
		{
			name: "TLS both ways and authentication",
			values: `sidecar: {proxy: {enabled: true, port: 9191, upstreamAddress: "[::1]:19191", requireAuthentication: true,
  tls: {volumeName: broker-certs, verifyClients: true, upstream: true, upstreamServerName: kafka-0.kafka}}}`,
			wantArgs: []string{
				"--proxy-listen-address=:9191", "--proxy-upstream-address=[::1]:19191", "--proxy-require-authentication",
				"--proxy-tls-cert-file=" + tlsDir + "/tls.crt", "--proxy-tls-key-file=" + tlsDir + "/tls.key",
				"--proxy-tls-client-ca-file=" + tlsDir + "/ca.crt",
				"--proxy-upstream-tls", "--proxy-upstream-tls-ca-file=" + tlsDir + "/ca.crt", "--proxy-upstream-tls-server-name=kafka-0.kafka",
			},
			wantVolume: "broker-certs",
		},
		{
			// docs/kafka-integration.md, "TLS on the inter-broker listener": the values it gives render
			// the flags it shows, the server name left for the kubelet to expand from the sidecar's
			// POD_NAME and POD_NAMESPACE (which assertSidecar checks).
			name: "TLS upstream verified for each pod's name",
			values: `sidecar: {proxy: {enabled: true,
  tls: {volumeName: kafka-tls, upstream: true, upstreamServerName: "$(POD_NAME).kafka-headless.$(POD_NAMESPACE).svc"}}}`,
			wantArgs: []string{
				"--proxy-listen-address=:9091", "--proxy-upstream-address=127.0.0.1:19091",
				"--proxy-tls-cert-file=" + tlsDir + "/tls.crt", "--proxy-tls-key-file=" + tlsDir + "/tls.key",
				"--proxy-upstream-tls", "--proxy-upstream-tls-ca-file=" + tlsDir + "/ca.crt",
				"--proxy-upstream-tls-server-name=$(POD_NAME).kafka-headless.$(POD_NAMESPACE).svc",
			},
			wantVolume: "kafka-tls",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, "--set", "sidecar.example.enabled=true", "-f", valuesFile(t, tc.values))
			spec := decode[corev1.PodTemplate](t, ms.only(t, "PodTemplate")).Template.Spec
			c := spec.InitContainers[0]
			assertSidecar(t, withoutProxyArgs(c), defaultSidecar(t)) // the rest is direct mode's
			var gotProxyArgs []string
			for _, a := range c.Args {
				if strings.HasPrefix(a, "--proxy-") {
					gotProxyArgs = append(gotProxyArgs, a)
				}
			}
			if !slices.Equal(gotProxyArgs, tc.wantArgs) {
				t.Errorf("proxy args %q, want %q", gotProxyArgs, tc.wantArgs)
			}
			port := strings.TrimPrefix(tc.wantArgs[0], "--proxy-listen-address=:")
			if got := portNumber(c, "sstate-proxy"); port != strconv.Itoa(int(got)) {
				t.Errorf("container port sstate-proxy %d, want %s", got, port)
			}
			wantMounts := []corev1.VolumeMount(nil)
			if tc.wantVolume != "" {
				wantMounts = []corev1.VolumeMount{{Name: tc.wantVolume, MountPath: tlsDir, ReadOnly: true}}
			}
			if !equality.Semantic.DeepEqual(c.VolumeMounts, wantMounts) {
				t.Errorf("volume mounts %+v, want %+v", c.VolumeMounts, wantMounts)
			}
			if tc.wantVolume != "" && (len(spec.Volumes) != 1 || spec.Volumes[0].Name != tc.wantVolume || spec.Volumes[0].Secret == nil) {
				t.Errorf("the example's volumes %+v, want the Secret %s", spec.Volumes, tc.wantVolume)
			}
		})
	}
}

// TestSidecarProxyModeRefused: values proxy mode cannot run with are refused when rendering.
func TestSidecarProxyModeRefused(t *testing.T) {
	for _, tc := range []struct {
		name, values, wantInError string
	}{
		{"port taken", "sidecar: {proxy: {enabled: true, port: 9087}}", "and from sidecar.proxy.port when proxy mode is on"},
		{"client CA without a volume", "sidecar: {proxy: {enabled: true, tls: {verifyClients: true}}}", "sidecar.proxy.tls.verifyClients needs sidecar.proxy.tls.volumeName"},
		{"upstream without a port", `sidecar: {proxy: {enabled: true, upstreamAddress: "127.0.0.1"}}`, "'/sidecar/proxy/upstreamAddress'"},
		{"unknown field", "sidecar: {proxy: {listen: 9091}}", "additional properties 'listen' not allowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := renderFails(t, "--set", "sidecar.example.enabled=true", "-f", valuesFile(t, tc.values))
			if !strings.Contains(out, tc.wantInError) {
				t.Errorf("helm template: %s\nwant it to say %q", out, tc.wantInError)
			}
		})
	}
	// Proxy mode off: its port may be any other's.
	render(t, "--set", "sidecar.example.enabled=true", "-f", valuesFile(t, "sidecar: {proxy: {port: 9087}}"))
}

// withoutProxyArgs is c without its proxy flags.
func withoutProxyArgs(c corev1.Container) corev1.Container {
	c.Args = slices.DeleteFunc(slices.Clone(c.Args), func(a string) bool { return strings.HasPrefix(a, "--proxy-") })
	c.Ports = slices.DeleteFunc(slices.Clone(c.Ports), func(p corev1.ContainerPort) bool { return p.Name == "sstate-proxy" })
	return c
}
