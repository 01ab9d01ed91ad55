//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// system is the running whole: a control plane and the processes started against it.
type system struct {
	t          *testing.T
	root       string // the repository
	bin        string // the binaries built for the test
	dir        string // kubeconfigs and logs
	env        *envtest.Environment
	admin      *rest.Config
	adminKC    string
	client     client.Client
	processes  []*exec.Cmd
	brokersNS  string
	operatorNS string
}

const (
	operatorNamespace = "sharestate-system"
	brokersNamespace  = "kafka"
	brokerAccount     = "kafka-broker"
	operatorAccount   = "sharestate-operator" // the chart's service account, with fullnameOverride
)

// startSystem starts a control plane without CRDs and builds the binaries.
func startSystem(t *testing.T) *system {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal(testenv.ErrNoAssets)
	}
	s := &system{t: t, root: testenv.RepoRoot(), dir: t.TempDir(), brokersNS: brokersNamespace, operatorNS: operatorNamespace}
	s.bin = filepath.Join(s.dir, "bin")
	s.buildBinaries()
	s.env = &envtest.Environment{ControlPlaneStartTimeout: testenv.ControlPlaneStartTimeout, ControlPlaneStopTimeout: testenv.ControlPlaneStopTimeout}
	cfg, err := s.env.Start()
	if err != nil {
		_ = s.env.Stop()
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(s.stop)
	admin, err := s.env.ControlPlane.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.admin = admin.Config()
	s.admin.QPS, s.admin.Burst = -1, -1
	s.adminKC = s.writeKubeconfig("admin", "")
	scheme, err := operator.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if s.client, err = client.New(s.admin, client.Options{Scheme: scheme}); err != nil {
		t.Fatal(err)
	}
	_ = cfg
	return s
}

func (s *system) stop() {
	for _, p := range s.processes {
		if p.Process != nil {
			_ = p.Process.Signal(os.Interrupt)
		}
	}
	for _, p := range s.processes {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
		}
	}
	if err := s.env.Stop(); err != nil {
		s.t.Logf("stopping the control plane: %v", err)
	}
}

// buildBinaries builds the operator, the sidecar and the kubectl plugin, and helm (pinned).
func (s *system) buildBinaries() {
	s.t.Helper()
	for _, cmd := range []string{"sharestate-operator", "sharestate-sidecar", "kubectl-sharestate"} {
		s.run("go", "build", "-o", filepath.Join(s.bin, cmd), "./cmd/"+cmd)
	}
	s.run("hack/tools/helm/build.sh", filepath.Join(s.bin, "helm"))
}

// run runs a command in the repository and fails the test with its output when it fails.
func (s *system) run(name string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = s.root
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// writeKubeconfig writes a kubeconfig for the admin user, impersonating user when it is not empty.
func (s *system) writeKubeconfig(name, user string) string {
	s.t.Helper()
	c := s.admin
	kc := clientcmdapi.NewConfig()
	kc.Clusters["e2e"] = &clientcmdapi.Cluster{Server: c.Host, CertificateAuthorityData: c.CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: c.CertData, ClientKeyData: c.KeyData, Impersonate: user}
	kc.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "user"}
	kc.CurrentContext = "e2e"
	path := filepath.Join(s.dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		s.t.Fatal(err)
	}
	return path
}

// serviceAccount is the user name under which a service account's requests are authorized.
func serviceAccount(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// installWithKubectlAndHelm applies the CRDs with kubectl and installs the chart with helm.
func (s *system) installWithKubectlAndHelm() {
	s.t.Helper()
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	s.run(kubectl, "--kubeconfig", s.adminKC, "apply", "--server-side", "-f", "config/crd/bases")
	s.run(kubectl, "--kubeconfig", s.adminKC, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/sharegroups.sharestate.dev", "crd/sharepartitionstates.sharestate.dev")
	s.run(kubectl, "--kubeconfig", s.adminKC, "create", "namespace", s.brokersNS)
	s.run(filepath.Join(s.bin, "helm"), "--kubeconfig", s.adminKC, "install", "sharestate", "charts/sharestate-operator",
		"--namespace", s.operatorNS, "--create-namespace",
		"--set", "fullnameOverride="+operatorAccount, "--set", "crds.install=false",
		"--set", "sidecar.rbac.namespaces={"+s.brokersNS+"}", "--set", "sidecar.serviceAccountName="+brokerAccount)
}

// start starts a process with its output in a log file of the test's directory.
func (s *system) start(name string, env []string, bin string, args ...string) *exec.Cmd {
	s.t.Helper()
	logFile, err := os.Create(filepath.Join(s.dir, name+".log"))
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(s.bin, bin), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting %s: %v", name, err)
	}
	s.processes = append(s.processes, cmd)
	s.t.Cleanup(func() {
		if s.t.Failed() {
			if out, err := os.ReadFile(logFile.Name()); err == nil {
				s.t.Logf("--- %s log (last 3000 bytes) ---\n%s", name, tail(out, 3000))
			}
		}
	})
	return cmd
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// startOperator runs the operator's binary out of cluster with the chart's service account's
// permissions (impersonated): the chart's Deployment has no kubelet to run it here.
func (s *system) startOperator() {
	s.t.Helper()
	kc := s.writeKubeconfig("operator", serviceAccount(s.operatorNS, operatorAccount))
	s.start("operator", nil, "sharestate-operator", "--kubeconfig", kc,
		"--leader-elect", "--leader-election-namespace", s.operatorNS,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
}

// broker is a broker pod and its sidecar.
type broker struct {
	id      int32
	pod     *corev1.Pod
	address string
}

// startBroker creates the broker's Pod object (Ready) and runs its sidecar with the broker service
// account's permissions.
func (s *system) startBroker(ctx context.Context, id int32, port int) *broker {
	s.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: s.brokersNS, Name: fmt.Sprintf("kafka-%d", id)},
		Spec:       corev1.PodSpec{ServiceAccountName: brokerAccount, Containers: []corev1.Container{{Name: "kafka", Image: "kafka"}}},
	}
	if err := s.client.Create(ctx, pod); err != nil {
		s.t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := s.client.Status().Update(ctx, pod); err != nil {
		s.t.Fatal(err)
	}
	kc := s.writeKubeconfig(pod.Name, serviceAccount(s.brokersNS, brokerAccount))
	b := &broker{id: id, pod: pod, address: fmt.Sprintf("127.0.0.1:%d", port)}
	s.start("sidecar-"+pod.Name, []string{"POD_NAMESPACE=" + s.brokersNS, "POD_NAME=" + pod.Name, "POD_UID=" + string(pod.UID)},
		"sharestate-sidecar", "--kubeconfig", kc, "--broker-id", fmt.Sprint(id),
		"--listen-address", b.address, "--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", port+100), "--metrics-bind-address", "0")
	return b
}

// plugin runs the kubectl plugin's binary as the admin.
func (s *system) plugin(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(s.bin, "kubectl-sharestate"), append([]string{"--kubeconfig", s.adminKC}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func clientWithWatch(s *system) client.WithWatch {
	s.t.Helper()
	scheme, err := operator.Scheme()
	if err != nil {
		s.t.Fatal(err)
	}
	c, err := client.NewWithWatch(s.admin, client.Options{Scheme: scheme})
	if err != nil {
		s.t.Fatal(err)
	}
	return c
}
