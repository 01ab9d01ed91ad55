// Package testenv starts a real control plane (kube-apiserver and etcd, through controller-runtime's
// envtest) with the project's CRDs installed, for the integration tests of every package, and holds
// the helpers those tests use to wait on it (Eventually, Poll, Follow).
package testenv

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	sharestatev1alpha1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/operator"
)

// Env is a running control plane.
type Env struct {
	env    *envtest.Environment
	logs   []io.Closer // the control plane's output, with Options.LogDir
	temp   string      // a directory removed once the control plane has stopped, or ""
	Config *rest.Config
	Scheme *k8sruntime.Scheme
	Client client.Client
}

// RepoRoot is the repository's top directory, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ErrNoAssets says the control-plane binaries are not configured.
var ErrNoAssets = errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds " +
	"kube-apiserver and etcd once (hack/envtest-assets.sh) and points KUBEBUILDER_ASSETS at them")

// How long each control-plane process may take to start and to stop: envtest's 20 s default is too
// short for etcd on a machine whose cores are busy elsewhere, and a test run that fails for it fails
// for nothing it tests.
const (
	ControlPlaneStartTimeout = 2 * time.Minute
	ControlPlaneStopTimeout  = time.Minute
)

// Start starts kube-apiserver and etcd and installs the CRDs of config/crd/bases.
func Start() (*Env, error) { return StartWith(Options{}) }

// Options are what StartWith changes of the control plane Start starts.
type Options struct {
	// LogDir, when not empty, keeps kube-apiserver's and etcd's output in it (kube-apiserver.log,
	// etcd.log, each line stamped with the time it arrived: StampedWriter): the bench lines up their
	// slow-request warnings and garbage collection traces with its own slow writes. Without it their
	// output is discarded (envtest's AttachControlPlaneOutput is not set).
	LogDir string
	// APIServerEnv is added to kube-apiserver's environment, NAME=value each (etcd's and this
	// process's are left alone): the bench's diagnostic of the write path without kube-apiserver's
	// garbage collector gives it GOGC=off and a GOMEMLIMIT.
	APIServerEnv []string
}

// StartWith is Start, with opts.
func StartWith(opts Options) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, ErrNoAssets
	}
	scheme, err := operator.Scheme()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:        []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing:    true,
		Scheme:                   scheme,
		ControlPlaneStartTimeout: ControlPlaneStartTimeout,
		ControlPlaneStopTimeout:  ControlPlaneStopTimeout,
	}
	logs, err := logControlPlane(env, opts.LogDir)
	if err != nil {
		return nil, err
	}
	e := &Env{env: env, logs: logs, Scheme: scheme}
	if len(opts.APIServerEnv) > 0 {
		wrapper, dir, err := writeAPIServerWrapper(opts.APIServerEnv)
		if err != nil {
			for _, f := range logs {
				_ = f.Close()
			}
			return nil, err
		}
		e.temp = dir
		if env.ControlPlane.APIServer == nil {
			env.ControlPlane.APIServer = &envtest.APIServer{}
		}
		env.ControlPlane.APIServer.Path = wrapper
	}
	cfg, err := env.Start()
	if err != nil {
		// Start leaves the processes running when a later step (installing the CRDs) fails.
		_ = e.Stop()
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	// Tests hammer the API server on purpose; client-side throttling would measure the client instead.
	cfg.QPS, cfg.Burst = -1, -1
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = e.Stop()
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	e.Config, e.Client = cfg, c
	return e, nil
}

// logControlPlane points kube-apiserver's and etcd's output at files of dir, if dir is not empty.
func logControlPlane(env *envtest.Environment, dir string) ([]io.Closer, error) {
	if dir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("the control plane's log directory: %w", err)
	}
	apiserver, err := os.Create(filepath.Join(dir, "kube-apiserver.log"))
	if err != nil {
		return nil, err
	}
	etcd, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		_ = apiserver.Close()
		return nil, err
	}
	apiserverLog, etcdLog := NewStampedWriter(apiserver), NewStampedWriter(etcd)
	env.ControlPlane.APIServer = &envtest.APIServer{Out: apiserverLog, Err: apiserverLog}
	env.ControlPlane.Etcd = &envtest.Etcd{Out: etcdLog, Err: etcdLog}
	return []io.Closer{apiserverLog, etcdLog}, nil // closing each closes its file
}

// Stop stops the control plane, and closes its logs once it has stopped writing them.
func (e *Env) Stop() error {
	err := e.env.Stop()
	for _, f := range e.logs {
		err = errors.Join(err, f.Close())
	}
	if e.temp != "" {
		err = errors.Join(err, os.RemoveAll(e.temp))
	}
	return err
}

// Run is a TestMain body: with -short it runs the tests without a control plane (those that need one
// skip themselves through Require); otherwise it starts one, runs the tests and stops it. set receives
// the running Env (nil with -short) and may return a function that stops what it started on it (an
// operator's manager, say): it runs before the control plane stops, so nothing holds it up.
func Run(m *testing.M, set func(*Env) (stop func())) int {
	flag.Parse()
	keepFuzzPipesFromChildren()
	if testing.Short() {
		set(nil)
		return m.Run()
	}
	env, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop := set(env)
	code := m.Run()
	if stop != nil {
		stop()
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	return code
}

// Require skips a test in -short mode, where no control plane runs.
func Require(t testing.TB, env *Env) {
	t.Helper()
	if env == nil {
		t.Skip("needs a control plane; skipped with -short (run `make test`)")
	}
}

// Namespace creates a namespace of its own for the test and deletes it when the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := e.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), ns) })
	return ns.Name
}

// GVR is the resource of a kind of this project's API.
func GVR(resource string) schema.GroupVersionResource {
	return sharestatev1alpha1.GroupVersion.WithResource(resource)
}

// Eventually polls cond every 50 ms until it returns nil, and fails t with cond's last error after
// timeout: tests assert on the world as it becomes, not on calls. Like t.Fatal, it must run on the
// test's goroutine; elsewhere use Poll.
func Eventually(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	if err := Poll(timeout, cond); err != nil {
		t.Fatal(err)
	}
}

// Poll polls cond every 50 ms until it returns nil, and returns an error with cond's last one after
// timeout. It does not touch the test, so it may run on any goroutine.
func Poll(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Get reads the object at key into obj, as a test's assertion does: a failed read is tried again for
// up to 10 s (an API server under load times out, or answers 429), and only one that keeps failing,
// or finds no object, fails t. It must run on the test's goroutine.
func Get(t testing.TB, c client.Client, key client.ObjectKey, obj client.Object) {
	t.Helper()
	var notFound error
	err := Poll(10*time.Second, func() error {
		err := c.Get(context.Background(), key, obj)
		if apierrors.IsNotFound(err) {
			notFound = err
			return nil
		}
		return err
	})
	if notFound != nil {
		err = notFound
	}
	if err != nil {
		t.Fatalf("reading %s: %v", key, err)
	}
}
