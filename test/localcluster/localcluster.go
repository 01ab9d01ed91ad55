// Package localcluster runs the system for a developer: on the cluster a kubeconfig names, or, when
// none is configured, on a local control plane (kube-apiserver and etcd, envtest's) whose data
// survives restarts and which one process at a time holds; and a stand-in broker that writes share
// state through a sidecar, so that the system shows some without Kafka.
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

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sharestate/sharestate-operator/internal/kubeconfig"
)

// The names of what a local control plane keeps in its run directory.
const (
	etcdDataDir    = "etcd"
	kubeconfigFile = "kubeconfig"
)

// Options configure Start and StartContext.
type Options struct {
	// RunDir keeps the local control plane's etcd data and the kubeconfig written for it, and the lock
	// that keeps a second run off it.
	RunDir string
	// CRDDir holds the CRD manifests to install.
	CRDDir string
	// Kubeconfig names an existing cluster to use instead of a local control plane, as a list of files
	// like $KUBECONFIG; empty for local.
	Kubeconfig string
	// KubeconfigSource says where Kubeconfig came from ("$KUBECONFIG", say), for the messages; default
	// "--kubeconfig".
	KubeconfigSource string
	// Logger receives what the start does, which takes seconds (default: discard).
	Logger logr.Logger
	// Fresh empties RunDir, once its lock is held, before the start: a run that begins from nothing
	// must not delete the data of another run that holds the directory.
	Fresh bool
}

// Cluster is a running system.
type Cluster struct {
	// Config reaches the cluster's API server as an administrator.
	Config *rest.Config
	// KubeconfigPath is the kubeconfig a user passes to kubectl.
	KubeconfigPath string
	// Local says whether the control plane was started here (and is stopped by Stop).
	Local bool

	cp   *envtest.ControlPlane // of a local control plane
	lock *runLock
}

// Start is StartContext without a way to stop it early.
func Start(opts Options) (*Cluster, error) {
	return StartContext(context.Background(), opts)
}

// StartContext brings up the cluster (or connects to the configured one) and installs the CRDs. When
// ctx ends before it is done, it stops what it started and returns ctx's cause.
//
// It first takes the lock of the run directory it will use, and fails with an *AlreadyRunningError
// if another process holds it. A kubeconfig that a local control plane of ours wrote means that
// control plane, whose run directory is then the one locked, and which is started if its API server
// is not running: after the Quickstart's `export KUBECONFIG=$PWD/.run/kubeconfig`, a second `make run`
// in the same shell must start it again, not fail to connect to it.
func StartContext(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.KubeconfigSource == "" {
		opts.KubeconfigSource = "--kubeconfig"
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	lockDir := opts.RunDir
	if dir, ok := ownRunDir(opts.Kubeconfig); ok {
		lockDir = dir
	}
	var lock *runLock
	if lockDir != "" {
		var err error
		if lock, err = lockRunDir(lockDir); err != nil {
			return nil, err
		}
	}
	if opts.Fresh {
		if err := emptyExceptLock(opts.RunDir); err != nil {
			lock.release()
			return nil, err
		}
	}
	c, err := startLocked(ctx, opts)
	if err != nil {
		lock.release()
		return nil, err
	}
	c.lock = lock
	return c, nil
}

// startLocked is StartContext's work once the run directory is held.
func startLocked(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Kubeconfig == "" {
		return startLocal(ctx, opts)
	}
	if runDir, stopped := stoppedLocalControlPlane(opts.Kubeconfig); stopped {
		opts.Logger.Info("The kubeconfig is that of a local control plane that is not running: starting it", "kubeconfig", opts.Kubeconfig, "runDir", runDir)
		opts.RunDir = runDir
		return startLocal(ctx, opts)
	}
	return connect(opts)
}

// ownRunDir says whether kubeconfig is one that startLocal wrote into a run directory (a file named
// kubeconfig beside the etcd data directory), returning that directory.
func ownRunDir(kubeconfigPath string) (runDir string, ok bool) {
	if kubeconfigPath == "" {
		return "", false
	}
	path, err := filepath.Abs(kubeconfigPath)
	if err != nil || filepath.Base(path) != kubeconfigFile {
		return "", false
	}
	runDir = filepath.Dir(path)
	if info, err := os.Stat(filepath.Join(runDir, etcdDataDir)); err != nil || !info.IsDir() {
		return "", false
	}
	return runDir, true
}

// stoppedLocalControlPlane says whether kubeconfig is the one startLocal wrote into a run directory
// and nothing answers at its API server's address, returning that run directory.
func stoppedLocalControlPlane(kubeconfigPath string) (runDir string, stopped bool) {
	runDir, ok := ownRunDir(kubeconfigPath)
	if !ok {
		return "", false
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(runDir, kubeconfigFile))
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
		return "", false // it runs, started by something that does not lock the run directory: use it
	}
	return runDir, true
}

func connect(opts Options) (*Cluster, error) {
	cfg, err := kubeconfig.LoadFiles(opts.KubeconfigSource, opts.Kubeconfig)
	var missing *kubeconfig.MissingFilesError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("%w; without it, a local control plane is started", err)
	}
	if err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{opts.CRDDir}, ErrorIfPathMissing: true}); err != nil {
		return nil, fmt.Errorf("installing the CRDs: %w", err)
	}
	return &Cluster{Config: cfg, KubeconfigPath: opts.Kubeconfig}, nil
}

func startLocal(ctx context.Context, opts Options) (*Cluster, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
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
	opts.Logger.Info("Starting the local control plane", "runDir", runDir)
	cp := newControlPlane(assets, etcdDir)
	if err := startControlPlane(ctx, cp); err != nil {
		return nil, fmt.Errorf("starting the local control plane: %w", err)
	}
	c := &Cluster{Local: true, cp: cp, KubeconfigPath: filepath.Join(runDir, kubeconfigFile)}
	err = c.writeAdminKubeconfig()
	if err == nil {
		err = installCRDs(ctx, c.Config, opts.CRDDir)
	}
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	opts.Logger.Info("Started the local control plane", "apiServer", c.Config.Host)
	return c, nil
}

// writeAdminKubeconfig writes a kubeconfig for an administrator of the local control plane.
func (c *Cluster) writeAdminKubeconfig() error {
	admin, err := c.cp.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
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

// Stop stops a local control plane (its data stays in the run directory) and gives the run directory
// up.
func (c *Cluster) Stop(_ context.Context) error {
	defer c.lock.release()
	if c.cp == nil {
		return nil
	}
	return c.cp.Stop()
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

// emptyExceptLock removes everything in dir but the lock file, which its holder keeps open.
func emptyExceptLock(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == lockFile {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("emptying %s: %w", dir, err)
		}
	}
	return nil
}
