package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Options say where the cluster's binaries and images are. Start reads the defaults from the
// environment `make test-cluster` sets.
type Options struct {
	// EnvtestAssets holds etcd, kube-apiserver and kubectl (default $KUBEBUILDER_ASSETS).
	EnvtestAssets string
	// NodeAssets holds kubelet, kube-controller-manager, kube-scheduler and kube-proxy (default
	// $CLUSTER_ASSETS; hack/cluster-assets.sh builds them).
	NodeAssets string
	// Images are image archives imported into the node's containerd before the kubelet starts.
	Images []string
	// PauseImage is the name of the imported image every pod's sandbox runs.
	PauseImage string
	// Dir keeps the cluster's data, state and logs (default
	// ${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/cluster/run). Its logs stay after Stop, for
	// a failed test to be read; everything else is removed.
	Dir string
	// Log receives a line for each step of the start (default: discarded).
	Log io.Writer
}

// Cluster is a running one-node cluster: every component of Kubernetes' hack/local-up-cluster.sh as
// a process on this machine (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
// kube-proxy) with containerd and runc running the pods, and CoreDNS answering the pods' lookups. One runs on a machine at a time: the
// kubelet's cgroups, kube-proxy's iptables chains and the pod network's bridge are the machine's.
type Cluster struct {
	// Dir is the cluster's directory (Options.Dir).
	Dir string
	// Kubeconfig is the path of a kubeconfig with the cluster administrator's rights.
	Kubeconfig string
	// Config reaches the API server as the cluster administrator.
	Config *rest.Config
	// Clientset is a client of Config.
	Clientset kubernetes.Interface
	// NodeName is the node's name.
	NodeName string

	opts  Options
	pki   *pki
	rec   *record
	procs []*process
	lock  *os.File
	log   io.Writer
}

// How long the start waits for each component to serve: generous, for a machine whose two cores CI
// shares with whatever else runs.
const componentTimeout = 3 * time.Minute

// Start starts a cluster, after removing what an earlier one on this machine left behind. It fails,
// having removed what it made, when a component does not start.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, err
	}
	c := &Cluster{Dir: opts.Dir, NodeName: nodeName, opts: opts, log: opts.Log}
	if err := c.takeMachine(); err != nil {
		return nil, err
	}
	if err := c.bringUp(ctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

func (o *Options) setDefaults() error {
	if o.EnvtestAssets == "" {
		o.EnvtestAssets = os.Getenv("KUBEBUILDER_ASSETS")
	}
	if o.NodeAssets == "" {
		o.NodeAssets = os.Getenv("CLUSTER_ASSETS")
	}
	if o.EnvtestAssets == "" || o.NodeAssets == "" {
		return errors.New("KUBEBUILDER_ASSETS and CLUSTER_ASSETS must name the Kubernetes binaries: run `make test-cluster`")
	}
	if o.PauseImage == "" {
		return errors.New("no PauseImage: every pod's sandbox needs an image built here")
	}
	if o.Dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return err
		}
		o.Dir = filepath.Join(cache, "sharestate-operator", "cluster", "run")
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if os.Geteuid() != 0 {
		return errors.New("a cluster needs root: the kubelet, containerd and runc manage cgroups, mounts and network namespaces")
	}
	return nil
}

// machineDir holds the machine's lock of clusters and the record of the one that runs, wherever its
// Dir: what a cluster leaves is the machine's, whichever directory it kept its data in. /run is
// emptied at boot, as are the cgroups, mounts and rules a record speaks of.
const machineDir = "/run/sharestate-test-cluster"

// takeMachine waits for any other cluster of this machine to stop, then removes what the last one
// left (a run that was killed cannot clean up after itself) and starts a new record.
func (c *Cluster) takeMachine() error {
	if err := os.MkdirAll(machineDir, 0o755); err != nil {
		return err
	}
	lock, err := os.OpenFile(filepath.Join(machineDir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		c.logf("another cluster runs on this machine (%s is locked); waiting for it to stop", lock.Name())
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
			_ = lock.Close()
			return err
		}
	}
	c.lock = lock
	recordPath := filepath.Join(machineDir, "record.json")
	last, err := loadRecord(recordPath)
	if err != nil {
		return err
	}
	if last != nil {
		c.logf("removing what the last cluster left (its directory: %s)", last.Dir)
		if err := last.sweep(); err != nil {
			return fmt.Errorf("removing what the last cluster left: %w", err)
		}
	}
	if err := os.RemoveAll(c.Dir); err != nil {
		return err
	}
	if err := os.MkdirAll(c.logDir(), 0o755); err != nil {
		return err
	}
	c.rec = &record{path: recordPath, Dir: c.Dir}
	return c.rec.save()
}

func (c *Cluster) bringUp(ctx context.Context) error {
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"the pod network's bridge", c.startBridge},
		{"certificates", c.makePKI},
		{"etcd and kube-apiserver", c.startAPIServer},
		{"kube-controller-manager and kube-scheduler", c.startControllers},
		{"the cluster's DNS", c.startDNS},
		{"containerd and the images", c.startContainerd},
		{"the kubelet", c.startKubelet},
		{"kube-proxy", c.startKubeProxy},
	}
	for _, s := range steps {
		began := time.Now()
		if err := s.run(ctx); err != nil {
			return fmt.Errorf("starting %s: %w", s.name, err)
		}
		c.logf("started %s in %.1fs", s.name, time.Since(began).Seconds())
	}
	return nil
}

// startBridge makes the bridge before anything starts: its address is the node's, where the API
// server listens, and the bridge plugin adopts it for the pods.
func (c *Cluster) startBridge(context.Context) error {
	c.rec.Bridge = bridgeName
	if err := c.rec.save(); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", nodeIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

func (c *Cluster) makePKI(context.Context) error {
	ids := []identity{adminIdentity, controllerIdentity, schedulerIdentity, proxyIdentity, kubeletClientIdentity, nodeIdentity(nodeName)}
	p, err := newPKI(c.path("pki"), net.ParseIP(nodeIP), net.ParseIP(kubernetesIP), ids...)
	if err != nil {
		return err
	}
	c.pki = p
	if err := p.signServing("kubelet-serving", nodeName, net.ParseIP(nodeIP)); err != nil {
		return err
	}
	for _, id := range ids {
		if err := c.writeKubeconfig(c.path("kubeconfig", id.file), id); err != nil {
			return err
		}
	}
	c.Kubeconfig = c.path("kubeconfig", adminIdentity.file)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	c.Config = cfg
	c.Clientset, err = kubernetes.NewForConfig(cfg)
	return err
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
	peerURL := "http://127.0.0.1:" + strconv.Itoa(freePort())
	etcd, err := c.start("etcd", filepath.Join(c.opts.EnvtestAssets, "etcd"),
		"--data-dir="+c.path("etcd"), "--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL, "--initial-cluster=default="+peerURL,
		"--unsafe-no-fsync")
	if err != nil {
		return err
	}
	p := c.pki.path
	apiserver, err := c.start("kube-apiserver", filepath.Join(c.opts.EnvtestAssets, "kube-apiserver"),
		"--etcd-servers="+etcdURL,
		"--bind-address="+nodeIP, "--advertise-address="+nodeIP, "--secure-port="+strconv.Itoa(apiServerPort),
		"--tls-cert-file="+p("apiserver.crt"), "--tls-private-key-file="+p("apiserver.key"),
		"--client-ca-file="+p("ca.crt"),
		"--service-account-issuer="+serviceAccount,
		"--service-account-key-file="+p("sa.pub"), "--service-account-signing-key-file="+p("sa.key"),
		"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
		"--service-cluster-ip-range="+serviceRange,
		"--kubelet-client-certificate="+p(kubeletClientIdentity.file+".crt"),
		"--kubelet-client-key="+p(kubeletClientIdentity.file+".key"),
		"--kubelet-certificate-authority="+p("ca.crt"),
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true", "--profiling=false")
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "the API server to be ready", func(ctx context.Context) error {
		if err := errors.Join(etcd.exited(), apiserver.exited()); err != nil {
			return backoffStop(err)
		}
		body, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("%w: %s", err, body)
		}
		return nil
	})
}

func (c *Cluster) startControllers(ctx context.Context) error {
	kcm, err := c.start("kube-controller-manager", filepath.Join(c.opts.NodeAssets, "kube-controller-manager"),
		"--kubeconfig="+c.path("kubeconfig", controllerIdentity.file),
		"--secure-port=0", "--leader-elect=false",
		"--use-service-account-credentials=true",
		"--service-account-private-key-file="+c.pki.path("sa.key"),
		"--root-ca-file="+c.pki.path("ca.crt"),
		"--service-cluster-ip-range="+serviceRange,
		"--cluster-name=sharestate-test")
	if err != nil {
		return err
	}
	scheduler, err := c.start("kube-scheduler", filepath.Join(c.opts.NodeAssets, "kube-scheduler"),
		"--kubeconfig="+c.path("kubeconfig", schedulerIdentity.file),
		"--secure-port=0", "--leader-elect=false")
	if err != nil {
		return err
	}
	// The service-account controller makes namespace default's account: pods need one to be created.
	return c.waitFor(ctx, "namespace default's service account", func(ctx context.Context) error {
		if err := errors.Join(kcm.exited(), scheduler.exited()); err != nil {
			return backoffStop(err)
		}
		_, err := c.Clientset.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// startDNS starts CoreDNS on the node's address, the kubelet's clusterDNS: the names of Services and
// of a StatefulSet's pods under their headless Service, from the API server, and nothing else.
func (c *Cluster) startDNS(ctx context.Context) error {
	readyPort := freePort()
	if err := writeFile(c.path("coredns", "Corefile"), c.corefile(readyPort)); err != nil {
		return err
	}
	dns, err := c.start("coredns", filepath.Join(c.opts.NodeAssets, "coredns"), "-conf", c.path("coredns", "Corefile"))
	if err != nil {
		return err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort)
	return c.waitFor(ctx, "CoreDNS to have read the API server", func(ctx context.Context) error {
		if err := dns.exited(); err != nil {
			return backoffStop(err)
		}
		return httpOK(ctx, url)
	})
}

func (c *Cluster) startContainerd(ctx context.Context) error {
	c.rec.ContainerdAddress = c.containerdAddress()
	if err := c.rec.save(); err != nil {
		return err
	}
	if err := writeFile(c.path("containerd", "config.toml"), c.containerdConfig(c.opts.PauseImage)); err != nil {
		return err
	}
	if err := writeFile(c.path("cni", "net.d", "10-sharestate.conflist"), c.cniConfig()); err != nil {
		return err
	}
	containerd, err := c.start("containerd", "containerd", "--config="+c.path("containerd", "config.toml"))
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, "containerd to serve", func(ctx context.Context) error {
		if err := containerd.exited(); err != nil {
			return backoffStop(err)
		}
		return c.Ctr(ctx, "version")
	}); err != nil {
		return err
	}
	for _, image := range c.opts.Images {
		if err := c.Ctr(ctx, "images", "import", image); err != nil {
			return err
		}
	}
	return nil
}

// Ctr runs containerd's own client against the cluster's containerd, in the namespace of the CRI's
// containers and images: `Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)` kills a container's
// process the way the kernel's OOM killer or a crash would, and the kubelet restarts it in place.
func (c *Cluster) Ctr(ctx context.Context, args ...string) error {
	args = append([]string{"--address", c.containerdAddress(), "--namespace", "k8s.io"}, args...)
	out, err := exec.CommandContext(ctx, "ctr", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// ruleComment marks the iptables rules a test adds, so that the sweep removes them too.
const ruleComment = "sharestate-test"

// CutFromAPIServer makes the API server unreachable from the pod of address podIP (its connections
// refused, as by a network policy or a partition), while the kubelet and everything else still
// reach it. The returned function mends it; the cluster's Stop does too.
func (c *Cluster) CutFromAPIServer(podIP string) (mend func() error, err error) {
	rule := []string{"INPUT", "-s", podIP, "-d", nodeIP, "-p", "tcp", "--dport", strconv.Itoa(apiServerPort),
		"-m", "comment", "--comment", ruleComment, "-j", "REJECT", "--reject-with", "tcp-reset"}
	if out, err := exec.Command("iptables", append([]string{"-w", "-I"}, rule...)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("iptables: %w: %s", err, out)
	}
	return func() error {
		if out, err := exec.Command("iptables", append([]string{"-w", "-D"}, rule...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("iptables: %w: %s", err, out)
		}
		return nil
	}, nil
}

// kubeletSysctls are the kernel settings the kubelet changes (protectKernelDefaults is off: with it on
// the kubelet refuses to start on a machine whose values differ). Stop puts back what they were.
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops"}

func (c *Cluster) startKubelet(ctx context.Context) error {
	c.rec.CgroupRoot, c.rec.IPTables = cgroupRoot, true
	c.rec.Sysctls = readSysctls(kubeletSysctls)
	if err := c.rec.save(); err != nil {
		return err
	}
	if err := writeFile(c.path("kubelet", "config.yaml"), c.kubeletConfig()); err != nil {
		return err
	}
	kubelet, err := c.start("kubelet", filepath.Join(c.opts.NodeAssets, "kubelet"),
		"--config="+c.path("kubelet", "config.yaml"),
		"--kubeconfig="+c.path("kubeconfig", "kubelet"),
		"--hostname-override="+nodeName, "--node-ip="+nodeIP,
		"--root-dir="+c.path("kubelet", "root"), "--cert-dir="+c.path("kubelet", "pki"))
	if err != nil {
		return err
	}
	return c.waitFor(ctx, "the node to be Ready", func(ctx context.Context) error {
		if err := kubelet.exited(); err != nil {
			return backoffStop(err)
		}
		node, err := c.Clientset.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("node %s is not Ready: %v", nodeName, node.Status.Conditions)
	})
}

func (c *Cluster) startKubeProxy(ctx context.Context) error {
	c.rec.KubeProxy = filepath.Join(c.opts.NodeAssets, "kube-proxy")
	if err := c.rec.save(); err != nil {
		return err
	}
	proxy, err := c.start("kube-proxy", c.rec.KubeProxy,
		"--kubeconfig="+c.path("kubeconfig", proxyIdentity.file),
		"--hostname-override="+nodeName, "--proxy-mode=iptables",
		"--cluster-cidr="+podSubnet, "--nodeport-addresses="+nodeIP+"/32",
		"--conntrack-max-per-core=0",
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(freePort()),
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(freePort()))
	if err != nil {
		return err
	}
	// Ready once it has written the rules of the `kubernetes` Service, which every pod that talks to
	// the API server uses.
	return c.waitFor(ctx, "kube-proxy's rules for the kubernetes Service", func(ctx context.Context) error {
		if err := proxy.exited(); err != nil {
			return backoffStop(err)
		}
		out, err := exec.CommandContext(ctx, "iptables-save", "-t", "nat").Output()
		if err != nil {
			return err
		}
		if !strings.Contains(string(out), "-d "+kubernetesIP+"/32") {
			return errors.New("no rule for " + kubernetesIP + " yet")
		}
		return nil
	})
}

// Stop stops every component, removes what the cluster made (containers, mounts, cgroups, iptables
// rules, the bridge) and all its data but the logs, and lets the next cluster of this machine start.
func (c *Cluster) Stop() error {
	if c.lock == nil {
		return nil
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	c.procs = nil
	err := c.rec.sweep()
	err = errors.Join(err, c.removeData())
	if err == nil {
		err = os.Remove(c.rec.path) // nothing is left for the next cluster to remove
	}
	err = errors.Join(err, c.lock.Close())
	c.lock = nil
	return err
}

// removeData removes the cluster's directory except its logs.
func (c *Cluster) removeData() error {
	entries, err := os.ReadDir(c.Dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Name() != "logs" {
			errs = append(errs, os.RemoveAll(filepath.Join(c.Dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "cluster: "+format+"\n", args...)
}

// stopWaiting wraps an error that waiting longer cannot mend (a component exited).
type stopWaiting struct{ error }

func backoffStop(err error) error { return stopWaiting{err} }

// waitFor polls cond every 200 ms until it returns nil, for up to componentTimeout.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, componentTimeout)
	defer cancel()
	var last error
	for {
		last = cond(ctx)
		if last == nil {
			return nil
		}
		var stop stopWaiting
		if errors.As(last, &stop) {
			return stop.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %w)", what, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var (
	portsMu sync.Mutex
	given   = map[int]bool{}
)

// httpOK returns nil when url answers 200.
func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s", url, resp.Status)
	}
	return nil
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago, and never the same one twice:
// the kernel may hand a port just closed to the next listener too.
func freePort() int {
	portsMu.Lock()
	defer portsMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !given[port] {
			given[port] = true
			return port
		}
	}
}
