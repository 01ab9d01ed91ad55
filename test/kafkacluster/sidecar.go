package kafkacluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SidecarOptions are what the sidecars run with.
type SidecarOptions struct {
	// Binary is the sharestate-sidecar binary.
	Binary string
	// Kubeconfig reaches the control plane as the sidecars' user.
	Kubeconfig string
	// Client creates the brokers' Pod objects.
	Client client.Client
	// Namespace holds the Pod objects and the share state.
	Namespace string
	// Args are added to every sidecar's flags.
	Args []string
}

// sidecarPorts is how many ports a sidecar takes: proxy, direct listener, health, metrics.
const sidecarPorts = 4

// Sidecar is a node's sidecar in proxy mode, and the Pod object of its broker.
type Sidecar struct {
	ProxyAddress   string
	DirectAddress  string
	HealthAddress  string
	MetricsAddress string
	// Pod is the broker's Pod object, as created.
	Pod *corev1.Pod

	node *Node
	proc process
}

func newSidecar(n *Node, ports []int) *Sidecar {
	return &Sidecar{
		ProxyAddress: loopback(ports[0]), DirectAddress: loopback(ports[1]),
		HealthAddress: loopback(ports[2]), MetricsAddress: loopback(ports[3]),
		node: n,
		proc: process{name: "sidecar-" + n.Name(), logPath: filepath.Join(n.cluster.opts.Dir, "sidecar-"+n.Name()+".log")},
	}
}

// startSidecars creates each broker's Pod object (Running and Ready, as a kubelet would report it)
// and starts its sidecar, and waits until every sidecar is ready.
func (c *Cluster) startSidecars() error {
	if c.opts.Sidecars == nil {
		return nil
	}
	for _, n := range c.Nodes {
		if err := n.Sidecar.createPod(); err != nil {
			return err
		}
		if err := n.Sidecar.Start(); err != nil {
			return err
		}
	}
	for _, n := range c.Nodes {
		if err := n.Sidecar.AwaitReady(time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// createPod creates the broker's Pod object, Running and Ready.
func (s *Sidecar) createPod() error {
	opts := s.node.cluster.opts.Sidecars
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: opts.Namespace, Name: s.node.Name(),
			Labels: map[string]string{"app": "kafka"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "apache/kafka"}}},
	}
	if err := opts.Client.Create(ctx, pod); err != nil {
		return fmt.Errorf("creating pod %s: %w", s.node.Name(), err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := opts.Client.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("marking pod %s ready: %w", s.node.Name(), err)
	}
	s.Pod = pod
	return nil
}

// Start starts the sidecar process.
func (s *Sidecar) Start() error {
	opts := s.node.cluster.opts.Sidecars
	args := []string{
		"--kubeconfig", opts.Kubeconfig, "--broker-id", fmt.Sprint(s.node.ID),
		"--listen-address", s.DirectAddress,
		"--proxy-listen-address", s.ProxyAddress, "--proxy-upstream-address", s.node.ReplicationAddress,
		"--health-probe-bind-address", s.HealthAddress,
		"--metrics-bind-address", s.MetricsAddress, "--metrics-secure=false",
	}
	env := []string{"POD_NAMESPACE=" + opts.Namespace, "POD_NAME=" + s.Pod.Name, "POD_UID=" + string(s.Pod.UID)}
	return s.proc.start(env, opts.Binary, append(args, opts.Args...)...)
}

// AwaitReady waits until the sidecar's /readyz answers 200: its Kafka listeners, the proxy's and the
// direct one, serve.
func (s *Sidecar) AwaitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !s.proc.running() {
			return fmt.Errorf("%s exited; its log ends:\n%s", s.proc.name, s.proc.logTail(3000))
		}
		resp, err := http.Get("http://" + s.HealthAddress + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v; its log ends:\n%s", s.proc.name, timeout, s.proc.logTail(3000))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Metrics is the sidecar's /metrics page.
func (s *Sidecar) Metrics() (string, error) {
	resp, err := http.Get("http://" + s.MetricsAddress + "/metrics")
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// Log is the sidecar's whole log.
func (s *Sidecar) Log() string { return s.proc.logTail(1 << 30) }

// LogPath is the sidecar's log file.
func (s *Sidecar) LogPath() string { return s.proc.logPath }

// Kill ends the sidecar at once (SIGKILL).
func (s *Sidecar) Kill() { s.proc.kill() }

// Stop stops the sidecar (SIGTERM; it drains), killing it after 30 s.
func (s *Sidecar) Stop() { s.proc.stop(30 * time.Second) }

// Restart kills the sidecar (SIGKILL), starts it again on the same addresses and waits until it is
// ready, within timeout; it returns how long that took, from the kill to ready. A port that another
// process took in the gap (the sidecar exits, "address already in use") is waited out: the sidecar is
// started again until the port is free or the time is up.
func (s *Sidecar) Restart(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	s.Kill()
	for {
		if err := s.Start(); err != nil {
			return 0, err
		}
		err := s.AwaitReady(time.Until(deadline))
		if err == nil {
			return time.Since(start), nil
		}
		if s.proc.running() || !strings.Contains(s.proc.logTail(3000), "address already in use") || time.Now().After(deadline) {
			return 0, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Running reports whether the sidecar's process runs.
func (s *Sidecar) Running() bool { return s.proc.running() }

// PID is the sidecar's process id, 0 when it does not run: for its CPU time and memory.
func (s *Sidecar) PID() int { return s.proc.pid() }
