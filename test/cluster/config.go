package cluster

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The pod network: a bridge that exists only on this machine, whose address is the node's. Pods get
// routes to the pod subnet (on the bridge) and to the service range (through the node, where
// kube-proxy translates a Service's address into its endpoint's), and none to anything else: the
// bridge plugin sets no default route (isDefaultGateway is off) and masquerades nothing (ipMasq is
// off), so nothing a pod sends leaves this machine.
const (
	bridgeName     = "sstest0"
	nodeIP         = "10.244.0.1"
	podSubnet      = "10.244.0.0/24"
	serviceRange   = "10.96.0.0/24"
	kubernetesIP   = "10.96.0.1" // the first address of serviceRange: the `kubernetes` Service's
	apiServerPort  = 6443
	kubeletPort    = 10250
	clusterDomain  = "cluster.local"
	cgroupRoot     = "kubepods" // the kubelet's default with the cgroupfs driver
	nodeName       = "sharestate-node"
	serviceAccount = "https://kubernetes.default.svc." + clusterDomain
)

// writeKubeconfig writes a kubeconfig that reaches the API server as id.
func (c *Cluster) writeKubeconfig(path string, id identity) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["sharestate-test"] = &clientcmdapi.Cluster{
		Server:               fmt.Sprintf("https://%s:%d", nodeIP, apiServerPort),
		CertificateAuthority: c.pki.path("ca.crt"),
	}
	kc.AuthInfos[id.user] = &clientcmdapi.AuthInfo{
		ClientCertificate: c.pki.path(id.file + ".crt"),
		ClientKey:         c.pki.path(id.file + ".key"),
	}
	kc.Contexts["sharestate-test"] = &clientcmdapi.Context{Cluster: "sharestate-test", AuthInfo: id.user}
	kc.CurrentContext = "sharestate-test"
	return clientcmd.WriteToFile(*kc, path)
}

// containerdConfig is containerd 1.6's configuration (version 2) for the cluster: its data, state and
// socket in the cluster's directory, its CRI plugin on runc with cgroupfs (the machine has cgroup v1
// and no systemd), the pause image built here as every pod's sandbox (no registry is reachable), and
// oom_score_adj kept within what the process may set (restrict_oom_score_adj): root here lacks
// CAP_SYS_RESOURCE, so runc cannot give a sandbox the negative score the kubelet asks for, and every
// sandbox would fail with "can't get final child's PID from pipe".
func (c *Cluster) containerdConfig(pauseImage string) string {
	return fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.grpc.v1.cri.tracing", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[6]q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %[7]q
    conf_dir = %[8]q
`, c.path("containerd", "root"), c.path("containerd", "state"), c.containerdAddress(), c.path("containerd", "ttrpc.sock"),
		c.path("containerd", "opt"), pauseImage, cniBinDir, c.path("cni", "net.d"))
}

// cniBinDir holds Debian's containernetworking-plugins.
const cniBinDir = "/usr/lib/cni"

func (c *Cluster) containerdAddress() string { return c.path("containerd", "containerd.sock") }

// cniConfig is the pod network: see the constants above.
func (c *Cluster) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "sharestate-test",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "gateway": %q}]],
        "routes": [{"dst": %q}]
      }
    }
  ]
}
`, bridgeName, c.path("cni", "ipam"), podSubnet, nodeIP, serviceRange)
}

// kubeletConfig is the kubelet's configuration. Each setting that is not the default says why.
func (c *Cluster) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The machine mounts the cgroup v1 controllers and runs no systemd.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /
containerRuntimeEndpoint: unix://%[1]s
address: %[2]s
port: %[3]d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %[4]s
authorization:
  mode: Webhook
clusterDomain: %[5]s
# The cluster's DNS (startDNS) is a pod's nameserver, and no nameserver of this machine's is:
# nothing a pod looks up goes beyond this machine.
clusterDNS: [%[9]s]
resolvConf: ""
failSwapOn: false
# The images were imported, not pulled: none may be collected, whatever the disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# The machine's disk is the CI's: evict only when it is truly full.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
serializeImagePulls: false
# Status every 2 s (not 10 s): a test that waits for a pod to become ready waits less.
nodeStatusUpdateFrequency: 2s
syncFrequency: 10s
fileCheckFrequency: 5s
tlsCertFile: %[6]s
tlsPrivateKeyFile: %[7]s
rotateCertificates: false
# The containers' logs stay with the cluster's after Stop, for a failed test to be read.
podLogsDir: %[8]s
`, c.containerdAddress(), nodeIP, kubeletPort, c.pki.path("ca.crt"), clusterDomain,
		c.pki.path("kubelet-serving.crt"), c.pki.path("kubelet-serving.key"), filepath.Join(c.logDir(), "pods"), nodeIP)
}

// corefile is CoreDNS's configuration: cluster.local and the reverse zones from the API server (as the
// administrator: the harness's own component), on the node's address, port 53. The kubernetes
// plugin's answers live 5 s (its default TTL), so a pod recreated with a new address is found by its
// name within seconds, as with kubeadm's CoreDNS. Nothing is forwarded.
func (c *Cluster) corefile(readyPort int) string {
	return fmt.Sprintf(`.:53 {
    bind %[1]s
    errors
    ready 127.0.0.1:%[2]d
    kubernetes %[3]s in-addr.arpa ip6.arpa {
        kubeconfig %[4]s sharestate-test
        pods insecure
    }
    cache 30
}
`, nodeIP, readyPort, clusterDomain, c.Kubeconfig)
}

func (c *Cluster) path(elem ...string) string {
	return filepath.Join(append([]string{c.Dir}, elem...)...)
}

func (c *Cluster) logDir() string { return c.path("logs") }

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}
