package persister_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire/serve"
	"github.com/sharestate/sharestate-operator/test/testenv"

	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// These tests check whom a Read or Write records as the partition's leader when another broker sent
// it (proxy mode: Kafka's persister calls the share coordinator of the key, docs/kafka-integration.md
// §2): that broker's pod, found by the label its sidecar sets, or nothing at all.

// brokerPod creates a pod in ns labelled as the pod of broker, and returns its UID.
func brokerPod(t *testing.T, ns, name string, broker int32) types.UID {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			sharestatev1.LabelBrokerID: strconv.Itoa(int(broker)),
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "kafka", Image: "apache/kafka"}}},
	}
	if err := env.Client.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	return pod.UID
}

// resolvingPersister is broker 1's persister, finding other brokers' pods with a PodResolver of ttl.
func resolvingPersister(t *testing.T, ns string, ttl time.Duration) *persister.Persister {
	t.Helper()
	c, err := client.New(env.Config, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	p, err := persister.New(persister.Options{
		Client: c, Namespace: ns, OperationTimeout: 10 * time.Second,
		Identity: persister.Identity{BrokerID: 1, PodName: podName(1), PodUID: "uid-" + podName(1)},
		Senders:  persister.NewPodResolver(c, ns, ttl),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func expectLeader(t *testing.T, what string, obj *sharestatev1.SharePartitionState, broker int32, pod string, uid types.UID) {
	t.Helper()
	l := obj.Status.Leader
	if l == nil || l.BrokerID != broker || l.PodName != pod || l.PodUID != string(uid) {
		t.Fatalf("%s: recorded leader %+v, want broker %d, pod %s (uid %s)", what, l, broker, pod, uid)
	}
}

func TestWriteFromAnotherBrokerRecordsItsPod(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	uid7 := brokerPod(t, ns, "kafka-7", 7)
	p := resolvingPersister(t, ns, 0)
	const group = "orders"
	expectCode(t, "initialize", initialize(t, p, group, 0, 1, 0), sharestate.ErrNone)
	// A Read without a sender is this persister's own broker's (direct mode).
	expectCode(t, "own read", read(t, p, group, 0, 3).PartitionResult, sharestate.ErrNone)
	expectLeader(t, "after its own read", getObject(t, ns, group, 0), 1, podName(1), types.UID("uid-"+podName(1)))

	from7 := sharestate.WithSender(context.Background(), 7)
	got := only(t, p.Write(from7, one(group, writeOf(1, 3, 0, acked(0, 4)))))
	expectCode(t, "write sent by broker 7", got, sharestate.ErrNone)
	obj := getObject(t, ns, group, 0)
	expectLeader(t, "after broker 7's write", obj, 7, "kafka-7", uid7)
	if len(obj.Status.StateBatches) != 1 || obj.Status.WriteCount != 1 {
		t.Fatalf("broker 7's write was not stored: %+v", obj.Status)
	}

	// A sender equal to the persister's own broker is the persister's own identity.
	got = only(t, p.Write(sharestate.WithSender(context.Background(), 1), one(group, writeOf(1, 3, 0, acked(5, 6)))))
	expectCode(t, "write naming broker 1", got, sharestate.ErrNone)
	expectLeader(t, "after broker 1's write", getObject(t, ns, group, 0), 1, podName(1), types.UID("uid-"+podName(1)))

	// A Read sent by broker 7 records it too.
	r := only(t, p.Read(from7, one(group, sharestate.ReadPartition{Partition: 0, LeaderEpoch: 4})))
	expectCode(t, "read sent by broker 7", r.PartitionResult, sharestate.ErrNone)
	expectLeader(t, "after broker 7's read", getObject(t, ns, group, 0), 7, "kafka-7", uid7)
}

func TestUnresolvableSenderIsRetriableAndRecordsNothing(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := resolvingPersister(t, ns, 0)
	const group = "orders"
	expectCode(t, "initialize", initialize(t, p, group, 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "own read", read(t, p, group, 0, 3).PartitionResult, sharestate.ErrNone)
	before := getObject(t, ns, group, 0)

	from9 := sharestate.WithSender(context.Background(), 9) // no pod says it is broker 9
	got := only(t, p.Write(from9, one(group, writeOf(1, 3, 0, acked(0, 4)))))
	expectCode(t, "write sent by an unknown broker", got, sharestate.ErrCoordinatorNotAvailable)
	r := only(t, p.Read(from9, one(group, sharestate.ReadPartition{Partition: 0, LeaderEpoch: 5})))
	expectCode(t, "read sent by an unknown broker", r.PartitionResult, sharestate.ErrCoordinatorNotAvailable)

	// Two live pods claiming one broker id: which one the broker runs in cannot be told.
	brokerPod(t, ns, "kafka-8a", 8)
	brokerPod(t, ns, "kafka-8b", 8)
	got = only(t, p.Write(sharestate.WithSender(context.Background(), 8), one(group, writeOf(1, 3, 0, acked(0, 4)))))
	expectCode(t, "write sent by a broker two pods claim", got, sharestate.ErrCoordinatorNotAvailable)

	after := getObject(t, ns, group, 0)
	if after.ResourceVersion != before.ResourceVersion {
		t.Fatalf("the object changed: leader %+v -> %+v, status %+v", before.Status.Leader, after.Status.Leader, after.Status)
	}
	expectLeader(t, "after the refused requests", after, 1, podName(1), types.UID("uid-"+podName(1)))

	// Once the broker's pod is labelled, the retried write goes through.
	uid9 := brokerPod(t, ns, "kafka-9", 9)
	expectCode(t, "write retried", only(t, p.Write(from9, one(group, writeOf(1, 3, 0, acked(0, 4))))), sharestate.ErrNone)
	expectLeader(t, "after the retried write", getObject(t, ns, group, 0), 9, "kafka-9", uid9)
}

// TestReplacedSenderPodIsLookedUpAgain: a broker whose pod was replaced (same name, new UID) after the
// operator fenced the old one is not taken, from a cached look-up, for the fenced pod.
func TestReplacedSenderPodIsLookedUpAgain(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	oldUID := brokerPod(t, ns, "kafka-7", 7)
	p := resolvingPersister(t, ns, time.Hour) // only a stale UID sends it back to the API server
	const group = "orders"
	ctx := context.Background()
	from7 := sharestate.WithSender(ctx, 7)
	expectCode(t, "initialize", initialize(t, p, group, 0, 1, 0), sharestate.ErrNone)
	expectCode(t, "read by broker 7", only(t, p.Read(from7, one(group, sharestate.ReadPartition{Partition: 0, LeaderEpoch: 3}))).PartitionResult, sharestate.ErrNone)

	// The operator's fence of the gone pod: state epoch up, the pod kept as the fenced leader.
	obj := getObject(t, ns, group, 0)
	obj.Status.FencedLeader, obj.Status.Leader = obj.Status.Leader, nil
	obj.Status.StateEpoch++
	if err := env.Client.Status().Update(ctx, obj); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kafka-7"}}
	if err := env.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	newUID := brokerPod(t, ns, "kafka-7", 7)
	if newUID == oldUID {
		t.Fatal("the new pod has the old UID")
	}
	time.Sleep(1100 * time.Millisecond) // a stale UID is looked up again at most once a second

	// The new pod's broker reads at the same leader epoch (the fenced pod is refused only up to it).
	r := only(t, p.Read(from7, one(group, sharestate.ReadPartition{Partition: 0, LeaderEpoch: 3})))
	expectCode(t, "read by broker 7's new pod", r.PartitionResult, sharestate.ErrNone)
	expectLeader(t, "after the new pod's read", getObject(t, ns, group, 0), 7, "kafka-7", newUID)
}

// TestWireClientIDNamesTheLeader: over Kafka's protocol, a Write whose client id is broker 7's
// persister's ("Persister-client-7") records broker 7's pod, not the serving persister's broker.
func TestWireClientIDNamesTheLeader(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	uid7 := brokerPod(t, ns, "kafka-7", 7)
	p := resolvingPersister(t, ns, 0)
	srv, err := serve.NewServer(serve.ServerOptions{Store: p})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveOnLoopback(t, srv)
	const group = "orders"
	expectCode(t, "initialize", initialize(t, p, group, 0, 1, 0), sharestate.ErrNone)

	cl, err := kafkawire.NewClient(kafkawire.ClientOptions{Address: addr, ClientID: "Persister-client-7"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	expectCode(t, "write over the wire", only(t, cl.Write(context.Background(), one(group, writeOf(1, 3, 0, acked(0, 4))))), sharestate.ErrNone)
	expectLeader(t, "after the write over the wire", getObject(t, ns, group, 0), 7, "kafka-7", uid7)
}

// serveOnLoopback serves srv on a loopback port until the test ends, and returns the address.
func serveOnLoopback(t *testing.T, srv *serve.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return ln.Addr().String()
}
