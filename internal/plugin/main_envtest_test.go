package plugin_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/internal/plugin"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

var (
	// env is the control plane the tests share, with the operator running against it (nil with
	// -short); each test works in a namespace of its own.
	env *testenv.Env
	// kubeconfig is a kubeconfig file for env, the way a user's points at their cluster.
	kubeconfig string
	// setupErr is what went wrong starting the operator or writing the kubeconfig.
	setupErr error

	ctx = context.Background()
)

// The topic every test group declares, as "orders", and one no group declares.
const (
	topicOrders     = "q1Sh0o2QRbuBzMz8vEMbvQ"
	topicUndeclared = "AAAAAAAAAAAAAAAAAAAAAQ"
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, func(e *testenv.Env) func() {
		env = e
		if e == nil {
			return nil
		}
		dir, err := os.MkdirTemp("", "kubectl-sharestate-test-")
		if err != nil {
			setupErr = err
			return nil
		}
		if kubeconfig, err = writeKubeconfig(e.Config, dir); err != nil {
			setupErr = err
			return func() { _ = os.RemoveAll(dir) }
		}
		stopOperator, err := startOperator(e.Config)
		if err != nil {
			setupErr = err
			return func() { _ = os.RemoveAll(dir) }
		}
		return func() {
			stopOperator()
			_ = os.RemoveAll(dir)
		}
	}))
}

// requireEnv skips the test in -short mode and fails it when the harness did not start.
func requireEnv(t *testing.T) {
	t.Helper()
	testenv.Require(t, env)
	if setupErr != nil {
		t.Fatalf("test harness: %v", setupErr)
	}
}

// writeKubeconfig writes a kubeconfig for cfg into dir and returns its path.
func writeKubeconfig(cfg *rest.Config, dir string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["envtest-admin"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
	}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "envtest-admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing the kubeconfig: %w", err)
	}
	return path, nil
}

// startOperator runs the operator's manager; the returned function stops it and waits until it has.
func startOperator(cfg *rest.Config) (func(), error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	runCtx, cancel := context.WithCancel(context.Background())
	// A resync a second: LeaderChanged events and the groups' totals follow the operator's looks at
	// every partition, which are two minutes apart by default.
	mgr, err := operator.NewManager(runCtx, cfg, operator.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0",
		PartitionResync: time.Second})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("creating the operator's manager: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(runCtx); err != nil {
			fmt.Fprintln(os.Stderr, "the operator's manager stopped:", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}, nil
}

// result is what one run of the plugin printed and returned.
type result struct {
	out, errOut string
	err         error
}

// kubectlSharestate runs the plugin's command in-process, as `kubectl sharestate args...` with the
// test's kubeconfig, stdin as its input.
func kubectlSharestate(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return runPlugin(t, kubeconfig, stdin, args...)
}

// kubectlSharestateWith runs the plugin with another kubeconfig file, without input.
func kubectlSharestateWith(t *testing.T, kubeconfigPath string, args ...string) result {
	t.Helper()
	return runPlugin(t, kubeconfigPath, "", args...)
}

func runPlugin(t *testing.T, kubeconfigPath, stdin string, args ...string) result {
	t.Helper()
	streams, in, out, errOut := genericiooptions.NewTestIOStreams()
	in.WriteString(stdin)
	cmd := plugin.NewCommand(genericclioptions.NewConfigFlags(false), streams)
	cmd.SetArgs(append([]string{"--kubeconfig", kubeconfigPath}, args...))
	err := cmd.ExecuteContext(ctx)
	t.Logf("kubectl sharestate %s\n%s%s(error: %v)", strings.Join(args, " "), out, errOut, err)
	return result{out: out.String(), errOut: errOut.String(), err: err}
}

// mustRun runs the plugin and fails the test if it returns an error.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	r := kubectlSharestate(t, "", args...)
	if r.err != nil {
		t.Fatalf("kubectl sharestate %s: %v", strings.Join(args, " "), r.err)
	}
	return r.out
}

// mustFail runs the plugin and fails the test unless it returns an error that contains want.
func mustFail(t *testing.T, stdin, want string, args ...string) result {
	t.Helper()
	r := kubectlSharestate(t, stdin, args...)
	if r.err == nil || !strings.Contains(r.err.Error(), want) {
		t.Fatalf("kubectl sharestate %s: error %v, want one containing %q", strings.Join(args, " "), r.err, want)
	}
	return r
}

// declareGroup creates the ShareGroup of groupID, under the name the persister looks for, declaring
// topicOrders as "orders" with the given partition count.
func declareGroup(t *testing.T, ns, groupID string, partitions int32) *sharestatev1.ShareGroup {
	t.Helper()
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName(groupID)},
		Spec: sharestatev1.ShareGroupSpec{GroupID: sharestatev1.GroupID(groupID),
			Topics: []sharestatev1.ShareGroupTopic{{TopicID: topicOrders, Name: "orders", Partitions: partitions}}},
	}
	if err := env.Client.Create(ctx, sg); err != nil {
		t.Fatal(err)
	}
	return sg
}

func getGroup(t *testing.T, sg *sharestatev1.ShareGroup) *sharestatev1.ShareGroup {
	t.Helper()
	got := &sharestatev1.ShareGroup{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sg), got); err != nil {
		t.Fatal(err)
	}
	return got
}

func getPartition(t *testing.T, ns, groupID string, partition int32) *sharestatev1.SharePartitionState {
	t.Helper()
	got := &sharestatev1.SharePartitionState{}
	key := client.ObjectKey{Namespace: ns, Name: sharestatev1.SharePartitionStateName(groupID, topicOrders, partition)}
	if err := env.Client.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	return got
}

// brokerPod creates a running, Ready broker pod.
func brokerPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "apache/kafka"}}},
	}
	if err := env.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// broker is a persister standing for a Kafka broker, to create realistic state with.
type broker struct {
	t       *testing.T
	p       *persister.Persister
	groupID string
	// startOffsets are the start offsets of the partitions' last Reads: a Write sends its
	// partition's, as a share-partition leader sends the start offset it holds (the stored
	// delivery-complete count moves only with a Write at or above the stored start offset).
	startOffsets map[int32]int64
}

// newBroker returns a persister for groupID standing for the broker in pod (nil: a broker without a pod).
func newBroker(t *testing.T, ns, groupID string, id int32, pod *corev1.Pod) *broker {
	t.Helper()
	c, err := client.New(rest.CopyConfig(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	identity := persister.Identity{BrokerID: id}
	if pod != nil {
		identity.PodName, identity.PodUID = pod.Name, string(pod.UID)
	}
	p, err := persister.New(persister.Options{Client: c, Namespace: ns, Identity: identity})
	if err != nil {
		t.Fatal(err)
	}
	return &broker{t: t, p: p, groupID: groupID, startOffsets: map[int32]int64{}}
}

func request[P any](group string, in P) sharestate.Request[P] {
	return sharestate.Request[P]{GroupID: group, Topics: []sharestate.TopicData[P]{{TopicID: sharestate.MustParseTopicID(topicOrders), Partitions: []P{in}}}}
}

func (b *broker) initialize(partition, stateEpoch int32, startOffset int64) {
	b.t.Helper()
	res := b.p.Initialize(ctx, request(b.groupID, sharestate.InitializePartition{Partition: partition, StateEpoch: stateEpoch, StartOffset: startOffset}))
	if r := res.Topics[0].Partitions[0]; r.ErrorCode != sharestate.ErrNone {
		b.t.Fatalf("initialize partition %d: %s: %s", partition, r.ErrorCode, r.ErrorMessage)
	}
}

func (b *broker) read(partition, leaderEpoch int32) sharestate.ReadResult {
	b.t.Helper()
	res := b.p.Read(ctx, request(b.groupID, sharestate.ReadPartition{Partition: partition, LeaderEpoch: leaderEpoch}))
	r := res.Topics[0].Partitions[0]
	if r.ErrorCode != sharestate.ErrNone {
		b.t.Fatalf("read partition %d: %s: %s", partition, r.ErrorCode, r.ErrorMessage)
	}
	b.startOffsets[partition] = r.StartOffset
	return r
}

// write writes batches at the start offset of the partition's last Read (-1 without one) and returns
// the answer's error code.
func (b *broker) write(partition, stateEpoch, leaderEpoch, deliveryComplete int32, batches ...sharestate.StateBatch) sharestate.ErrorCode {
	b.t.Helper()
	start, read := b.startOffsets[partition]
	if !read {
		start = -1
	}
	res := b.p.Write(ctx, request(b.groupID, sharestate.WritePartition{Partition: partition, StateEpoch: stateEpoch, LeaderEpoch: leaderEpoch,
		StartOffset: start, DeliveryCompleteCount: deliveryComplete, StateBatches: batches}))
	return res.Topics[0].Partitions[0].ErrorCode
}

// mustWrite writes batches and fails the test unless the write is answered NONE.
func (b *broker) mustWrite(partition, stateEpoch, leaderEpoch, deliveryComplete int32, batches ...sharestate.StateBatch) {
	b.t.Helper()
	if code := b.write(partition, stateEpoch, leaderEpoch, deliveryComplete, batches...); code != sharestate.ErrNone {
		b.t.Fatalf("write partition %d: %s", partition, code)
	}
}

func batch(first, last int64, state sharestate.DeliveryState, count int16) sharestate.StateBatch {
	return sharestate.StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: count}
}

// lineMatching returns the first line of out matching pattern, failing the test if none does.
func lineMatching(t *testing.T, out, pattern string) string {
	t.Helper()
	re := regexp.MustCompile(pattern)
	for _, line := range strings.Split(out, "\n") {
		if re.MatchString(line) {
			return line
		}
	}
	t.Fatalf("no line matches %q in:\n%s", pattern, out)
	return ""
}
