//go:build kafka

package kafka

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// suite is what every test shares: one control plane, the binaries, Kafka's jars and ShareTool.
var suite struct {
	env       *testenv.Env
	root      string
	bin       string
	assets    string
	shareTool string
	version   string
}

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	// envtest logs through controller-runtime's logger; this test's story is in the processes' logs.
	ctrllog.SetLogger(logr.Discard())
	suite.root = testenv.RepoRoot()
	suite.version = kafkacluster.Version()
	work, err := os.MkdirTemp("", "sharestate-kafka-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()
	if err := prepare(work); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.env = env
	fmt.Fprintf(os.Stderr, "Apache Kafka %s from %s\n", suite.version, suite.assets)
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	return code
}

// prepare builds the binaries, resolves Kafka's jars and compiles ShareTool, into work.
func prepare(work string) error {
	suite.bin = filepath.Join(work, "bin")
	for _, cmd := range []string{"sharestate-sidecar", "sharestate-operator"} {
		build := exec.Command("go", "build", "-o", filepath.Join(suite.bin, cmd), "./cmd/"+cmd)
		build.Dir = suite.root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", cmd, err, out)
		}
	}
	assets, err := kafkacluster.Assets(suite.root, suite.version)
	if err != nil {
		return err
	}
	suite.assets = assets
	classes := filepath.Join(work, "classes")
	if err := os.MkdirAll(classes, 0o755); err != nil {
		return err
	}
	suite.shareTool, err = kafkacluster.CompileShareTool(suite.root, assets, classes)
	return err
}

// system is one test's whole: a namespace, the operator, a Kafka cluster behind sidecars, clients.
type system struct {
	t        *testing.T
	ns       string
	dir      string
	cluster  *kafkacluster.Cluster
	clients  kafkacluster.Clients
	operator *kafkacluster.Operator
	adminKC  string
}

type systemOptions struct {
	// noSidecars starts the brokers with Kafka's own persister.
	noSidecars bool
	// noOperator leaves the operator out.
	noOperator   bool
	brokerConfig map[string]string
	// sidecarArgs are added to every sidecar's flags.
	sidecarArgs []string
	// bypassProxy lists nodes that advertise their real inter-broker listener, not their proxy.
	bypassProxy []int32
}

// startSystem starts the operator and a three-node cluster whose brokers keep their share state in
// the test's namespace, and stops them when the test ends (keeping their logs in the test's log on
// failure).
func startSystem(t *testing.T, opts systemOptions) *system {
	t.Helper()
	if suite.env == nil {
		t.Fatal(testenv.ErrNoAssets)
	}
	s := &system{t: t, dir: t.TempDir()}
	s.ns = createNamespace(t)
	s.adminKC = testenv.AdminKubeconfig(t, suite.env.Config)
	if !opts.noOperator {
		s.startOperator()
	}
	copts := kafkacluster.Options{Dir: s.dir, Assets: suite.assets, BrokerConfig: opts.brokerConfig, BypassProxy: opts.bypassProxy}
	if !opts.noSidecars {
		copts.Sidecars = &kafkacluster.SidecarOptions{
			Binary: filepath.Join(suite.bin, "sharestate-sidecar"), Kubeconfig: s.adminKC,
			Client: suite.env.Client, Namespace: s.ns, Args: opts.sidecarArgs,
		}
	}
	cluster, err := kafkacluster.Start(copts)
	t.Cleanup(func() { s.stop(cluster) })
	if err != nil {
		t.Fatalf("starting Kafka %s: %v", suite.version, err)
	}
	s.cluster = cluster
	s.clients = kafkacluster.Clients{Assets: suite.assets, ShareTool: suite.shareTool,
		Bootstrap: cluster.BootstrapServers(), Dir: s.dir}
	return s
}

func createNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "kafka-"}}
	if err := suite.env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating a namespace: %v", err)
	}
	return ns.Name
}

func (s *system) startOperator() {
	s.t.Helper()
	op, err := kafkacluster.StartOperator(filepath.Join(suite.bin, "sharestate-operator"), s.adminKC, s.ns,
		filepath.Join(s.dir, "operator.log"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.operator = op
}

// stop stops the cluster and the operator; on failure it prints where their logs are and their ends.
func (s *system) stop(cluster *kafkacluster.Cluster) {
	if cluster != nil {
		cluster.Stop()
	}
	if s.operator != nil {
		s.operator.Stop()
	}
	if s.t.Failed() {
		s.keepLogs()
	}
}

// keepLogs copies the test's logs to KAFKA_TEST_LOGS (a directory CI keeps), if set, and tells where.
func (s *system) keepLogs() {
	dst := os.Getenv("KAFKA_TEST_LOGS")
	if dst == "" {
		s.t.Logf("logs of the brokers, sidecars, operator and clients were in %s (set KAFKA_TEST_LOGS to keep them)", s.dir)
		return
	}
	dst = filepath.Join(dst, s.t.Name())
	if err := os.MkdirAll(dst, 0o755); err != nil {
		s.t.Log(err)
		return
	}
	matches, _ := filepath.Glob(filepath.Join(s.dir, "*.log"))
	outs, _ := filepath.Glob(filepath.Join(s.dir, "*.out"))
	for _, f := range append(matches, outs...) {
		if b, err := os.ReadFile(f); err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
	s.t.Logf("logs kept in %s", dst)
}
