package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// KafkaScenario names the family that measures the system against Kafka's own persister, on real
// brokers (test/kafkacluster); like the scale scenarios, it runs only when named. It needs Java and
// Maven (Kafka's jars come from Maven Central through hack/kafka-assets.sh).
const KafkaScenario = "kafka"

// KafkaConfig shapes the kafka family.
type KafkaConfig struct {
	// Version is the Kafka release (default kafkacluster.Version(): KAFKA_VERSION, else the default).
	Version string
	// Records is how many records each share-consumption cell produces and consumes.
	Records int
	// Trials is how many leader losses are timed per persister.
	Trials int
	// Families are the parts to run (default all): share, leader-loss, proxy.
	Families []string
	// ShareCells are the share family's cells (default DefaultShareCells).
	ShareCells []ShareCell
	// ShareTrials is how many times each share cell is measured per persister; the ratios are of
	// the medians.
	ShareTrials int
	// SidecarArgs are added to every sidecar's flags, e.g. --kube-api-qps=0 to take the client-side
	// rate limit out of a measurement.
	SidecarArgs []string
	// ControlPlaneCPUs, when set, keeps kube-apiserver and etcd on these CPUs and everything else
	// (brokers, sidecars, operator, clients) on the others, as a production control plane runs on
	// machines of its own; both persisters are measured so.
	ControlPlaneCPUs []int
}

// Kafka families, in the order they run.
const (
	kafkaShare      = "share"
	kafkaLeaderLoss = "leader-loss"
	kafkaProxy      = "proxy"
)

// KafkaFamilies are the parts of the kafka family, in the order they run.
var KafkaFamilies = []string{kafkaShare, kafkaLeaderLoss, kafkaProxy}

func (c KafkaConfig) runs(family string) bool {
	return len(c.Families) == 0 || slices.Contains(c.Families, family)
}

// kafkaRun is one run of the kafka family: one control plane, the binaries, Kafka's jars and
// ShareTool, and the report.
type kafkaRun struct {
	cfg        KafkaConfig
	log        io.Writer
	env        *testenv.Env
	work       string // removed at the end
	bin        string
	assets     string
	shareTool  string
	kubeconfig string
	report     *kafkaReport
	profileDir string // when set, receives kube-apiserver's CPU profile of each share cell of ours
}

// runKafka runs the kafka family and prints its report to out.
func runKafka(ctx context.Context, cfg Config, out, log io.Writer) error {
	k := &kafkaRun{cfg: cfg.Kafka, log: log, report: newKafkaReport(out), profileDir: cfg.ProfileDir}
	if k.cfg.Version == "" {
		k.cfg.Version = kafkacluster.Version()
	}
	if k.cfg.Records <= 0 {
		k.cfg.Records = 400000
	}
	if k.cfg.Trials <= 0 {
		k.cfg.Trials = 3
	}
	work, err := os.MkdirTemp("", "sharestate-kafka-bench-")
	if err != nil {
		return err
	}
	k.work = work
	defer func() { _ = os.RemoveAll(work) }()
	if err := k.prepare(); err != nil {
		return err
	}
	fmt.Fprintf(log, "bench: kafka: Apache Kafka %s; starting a control plane (kube-apiserver and etcd)\n", k.cfg.Version)
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	k.env = env
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(log, "bench: stopping the control plane:", err)
		}
	}()
	if len(k.cfg.ControlPlaneCPUs) > 0 {
		restore, err := pinControlPlane(k.cfg.ControlPlaneCPUs)
		if err != nil {
			return err
		}
		defer func() {
			if err := restore(); err != nil {
				fmt.Fprintln(log, "bench: giving the bench back its CPUs:", err)
			}
		}()
	}
	k.kubeconfig = filepath.Join(work, "kubeconfig")
	if err := testenv.WriteAdminKubeconfig(env.Config, k.kubeconfig); err != nil {
		return err
	}
	k.report.header(k.cfg.Version, k.cfg.ControlPlaneCPUs)
	families := []struct {
		name string
		run  func(context.Context) error
	}{
		{kafkaShare, k.measureShare},
		{kafkaLeaderLoss, k.measureLeaderLoss},
		{kafkaProxy, k.measureProxy},
	}
	var failed []string
	for _, f := range families {
		if !k.cfg.runs(f.name) || ctx.Err() != nil {
			continue
		}
		fmt.Fprintf(log, "bench: kafka: %s\n", f.name)
		if err := f.run(ctx); err != nil {
			fmt.Fprintf(log, "bench: kafka: %s failed: %v\n", f.name, err)
			k.report.failure(f.name, err)
			failed = append(failed, f.name)
		}
	}
	k.report.targets()
	if len(failed) > 0 {
		return fmt.Errorf("kafka families failed: %s", strings.Join(failed, ", "))
	}
	return ctx.Err()
}

// prepare builds the sidecar and operator, resolves Kafka's jars and compiles ShareTool.
func (k *kafkaRun) prepare() error {
	root := testenv.RepoRoot()
	k.bin = filepath.Join(k.work, "bin")
	for _, cmd := range []string{"sharestate-sidecar", "sharestate-operator"} {
		build := exec.Command("go", "build", "-o", filepath.Join(k.bin, cmd), "./cmd/"+cmd)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("building %s: %w\n%s", cmd, err, out)
		}
	}
	fmt.Fprintf(k.log, "bench: kafka: resolving Apache Kafka %s's jars (Maven Central, cached)\n", k.cfg.Version)
	assets, err := kafkacluster.Assets(root, k.cfg.Version)
	if err != nil {
		return err
	}
	k.assets = assets
	classes := filepath.Join(k.work, "classes")
	if err := os.MkdirAll(classes, 0o755); err != nil {
		return err
	}
	k.shareTool, err = kafkacluster.CompileShareTool(root, assets, classes)
	return err
}

// kafkaSystem is one cluster of the family: three brokers with Kafka's own persister, or behind
// proxy-mode sidecars with the operator beside them.
type kafkaSystem struct {
	name     string
	cluster  *kafkacluster.Cluster
	clients  kafkacluster.Clients
	ns       string
	operator *kafkacluster.Operator
}

// startSystem starts a cluster named name (its directory and namespace); ours says whether its share
// state goes to the sidecars (SharePartitionStates) or to Kafka's own __share_group_state. shape, if
// set, adjusts the cluster's options before it starts.
func (k *kafkaRun) startSystem(ctx context.Context, name string, ours bool, shape func(*kafkacluster.Options)) (*kafkaSystem, error) {
	dir := filepath.Join(k.work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &kafkaSystem{name: name}
	opts := kafkacluster.Options{Dir: dir, Assets: k.assets}
	if ours {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kafka-" + name}}
		if err := k.env.Client.Create(ctx, ns); err != nil {
			return nil, fmt.Errorf("creating namespace %s: %w", ns.Name, err)
		}
		s.ns = ns.Name
		op, err := kafkacluster.StartOperator(filepath.Join(k.bin, "sharestate-operator"), k.kubeconfig, s.ns,
			filepath.Join(dir, "operator.log"))
		if err != nil {
			return nil, err
		}
		s.operator = op
		opts.Sidecars = &kafkacluster.SidecarOptions{
			Binary: filepath.Join(k.bin, "sharestate-sidecar"), Kubeconfig: k.kubeconfig,
			Client: k.env.Client, Namespace: s.ns, Args: k.cfg.SidecarArgs,
		}
	}
	if shape != nil {
		shape(&opts)
	}
	fmt.Fprintf(k.log, "bench: kafka: starting cluster %s (%s)\n", name, persisterName(ours))
	cluster, err := kafkacluster.Start(opts)
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("starting cluster %s: %w", name, err)
	}
	s.cluster = cluster
	s.clients = kafkacluster.Clients{Assets: k.assets, ShareTool: k.shareTool, Bootstrap: cluster.BootstrapServers(), Dir: dir}
	return s, nil
}

// persisterName names where a system keeps share state, for the report.
func persisterName(ours bool) string {
	if ours {
		return "sharestate"
	}
	return "kafka"
}

// stop stops the cluster and the operator.
func (s *kafkaSystem) stop() {
	if s.cluster != nil {
		s.cluster.Stop()
	}
	if s.operator != nil {
		s.operator.Stop()
	}
}

// nodePIDs are the pids of the cluster's broker JVMs.
func (s *kafkaSystem) nodePIDs() []int {
	var pids []int
	for _, n := range s.cluster.Nodes {
		pids = append(pids, n.PID())
	}
	return pids
}

// sidecarPIDs are the pids of the cluster's sidecars (none with Kafka's own persister).
func (s *kafkaSystem) sidecarPIDs() []int {
	var pids []int
	for _, n := range s.cluster.Nodes {
		if n.Sidecar != nil {
			pids = append(pids, n.Sidecar.PID())
		}
	}
	return pids
}
