// Package localcluster runs the system for a developer: on the cluster a kubeconfig names, or, when
// none is configured, on a local control plane (kube-apiserver and etcd, started through envtest)
// whose data survives restarts.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// The names of what a local control plane keeps in its run directory.
const (
	etcdDataDir    = "etcd"
	kubeconfigFile = "kubeconfig"
)

// Options configure Start.
type Options struct {
	// RunDir keeps the local control plane's etcd data and the kubeconfig written for it.
	RunDir string
	// CRDDir holds the CRD manifests to install.
	CRDDir string
	// Kubeconfig names an existing cluster to use instead of a local control plane; empty for local.
	Kubeconfig string
}

// Cluster is a running system.
type Cluster struct {
	// Config reaches the cluster's API server as an administrator.
	Config *rest.Config
	// KubeconfigPath is the kubeconfig a user passes to kubectl.
	KubeconfigPath string
	// Local says whether the control plane was started here (and is stopped by Stop).
	Local bool

	env *envtest.Environment
}

// Start brings up the cluster (or connects to the configured one) and installs the CRDs.
//
// A kubeconfig that a local control plane of ours wrote, whose API server is not running, means that
// control plane: after the Quickstart's `export KUBECONFIG=$PWD/.run/kubeconfig`, a second `make run` in
// the same shell must start it again, not fail to connect to it.
func Start(opts Options) (*Cluster, error) {
	if opts.Kubeconfig == "" {
		return startLocal(opts)
	}
	if runDir, stopped := stoppedLocalControlPlane(opts.Kubeconfig); stopped {
		fmt.Fprintf(os.Stderr, "%s is the kubeconfig of the local control plane in %s, which is not running: starting it\n",
			opts.Kubeconfig, runDir)
		opts.RunDir = runDir
		return startLocal(opts)
	}
	return connect(opts)
}

// stoppedLocalControlPlane says whether kubeconfig is the one startLocal wrote into a run directory (a
// file named kubeconfig beside the etcd data directory) and nothing answers at its API server's
// address, returning that run directory.
func stoppedLocalControlPlane(kubeconfig string) (runDir string, stopped bool) {
	path, err := filepath.Abs(kubeconfig)
	if err != nil || filepath.Base(path) != kubeconfigFile {
		return "", false
	}
	runDir = filepath.Dir(path)
	if info, err := os.Stat(filepath.Join(runDir, etcdDataDir)); err != nil || !info.IsDir() {
		return "", false
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return "", false
	}
	host, err := url.Parse(cfg.Host)
	if err != nil || host.Host == "" {
		return "", false
	}
	conn, err := net.DialTimeout("tcp", host.Host, 2*time.Second)
	if err == nil {
		_ = conn.Close()
		return "", false // it runs (another `make run`, say): use it
	}
	return runDir, true
}

func connect(opts Options) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", opts.Kubeconfig, err)
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{opts.CRDDir}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing the CRDs: %w", err)
	}
	return &Cluster{Config: cfg, KubeconfigPath: opts.Kubeconfig}, nil
}

func startLocal(opts Options) (*Cluster, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: start the local control plane with `make run`, " +
			"which builds kube-apiserver and etcd once and points KUBEBUILDER_ASSETS at them")
	}
	runDir, err := filepath.Abs(opts.RunDir)
	if err != nil {
		return nil, err
	}
	etcdDir := filepath.Join(runDir, etcdDataDir)
	if err := os.MkdirAll(etcdDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", etcdDir, err)
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{opts.CRDDir},
		ErrorIfCRDPathMissing: true,
		// envtest's 20 s is too short for etcd on a machine whose cores are busy elsewhere.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	// A data directory we name is kept on Stop (envtest removes only the ones it made up), so the
	// objects survive a restart of `make run`.
	env.ControlPlane.Etcd = &envtest.Etcd{DataDir: etcdDir}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // Start leaves the processes running when installing the CRDs fails
		return nil, fmt.Errorf("starting the local control plane: %w", err)
	}
	c := &Cluster{Config: cfg, Local: true, env: env, KubeconfigPath: filepath.Join(runDir, kubeconfigFile)}
	if err := c.writeAdminKubeconfig(); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return c, nil
}

// writeAdminKubeconfig writes a kubeconfig for an administrator of the local control plane.
func (c *Cluster) writeAdminKubeconfig() error {
	admin, err := c.env.ControlPlane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return fmt.Errorf("creating the admin user: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return fmt.Errorf("rendering the admin kubeconfig: %w", err)
	}
	if err := os.WriteFile(c.KubeconfigPath, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", c.KubeconfigPath, err)
	}
	c.Config = admin.Config()
	return nil
}

// Stop stops a local control plane (its data stays in the run directory); for a remote cluster it
// does nothing.
func (c *Cluster) Stop(_ context.Context) error {
	if c.env == nil {
		return nil
	}
	return c.env.Stop()
}

// EnsurePod returns the named Pod, creating it (Running and Ready: no kubelet runs it here) if it does
// not exist. It stands for a broker pod whose sidecar runs outside the cluster.
func (c *Cluster) EnsurePod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	pod := &corev1.Pod{}
	err = cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, pod)
	if err == nil {
		return pod, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("reading pod %s/%s: %w", namespace, name, err)
	}
	pod = &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": "sharestate-local"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "apache/kafka"}}},
	}
	if err := cl.Create(ctx, pod); err != nil {
		return nil, fmt.Errorf("creating pod %s/%s: %w", namespace, name, err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := cl.Status().Update(ctx, pod); err != nil {
		return nil, fmt.Errorf("marking pod %s/%s ready: %w", namespace, name, err)
	}
	return pod, nil
}
