//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// leaseName is the operator's leader-election Lease (internal/operator).
const leaseName = "sharestate-operator.sharestate.dev"

// TestSystemInACluster installs and runs the system as the README says, step by step: each step
// builds on the ones before, as a user's session would.
func TestSystemInACluster(t *testing.T) {
	var s session
	for _, st := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"helm install as the README says runs the operator", s.installOperator},
		{"the sidecar in a broker pod serves the stand-in broker", s.sidecarInBrokerPod},
		{"the metrics endpoints as the chart secures them", s.metricsSecured},
		{"the sidecar serves API keys 83-87 on its pod's loopback", s.servesEveryOperation},
		{"the sidecar stays ready while the API server is out of its reach", s.readyWithoutAPIServer},
		{"a container killed and restarted in place is not fenced", s.restartInPlaceNotFenced},
		{"kubectl delete pod fences its partitions; the recreated pod leads them", s.deletePodFences},
		{"kubectl sharestate describes the group", s.describeGroup},
		{"two replicas: the other takes over when the leader's pod goes", s.twoReplicasTakeOver},
		{"§4's Kafka StatefulSet runs as written, the sidecars in proxy mode", s.kafkaBrokersRun},
		{"a share group in a Job accepts 20,000 records once each, its state led by Kafka's leaders", s.kafkaConsumesOnce},
		{"kubectl delete pod kafka-1 while consuming: a new leader, no acceptance lost, no live leader fenced", s.kafkaPodDeleted},
		{"a broker container killed: restarted in place, not fenced, no acceptance lost", s.kafkaBrokerKilled},
		{"a sidecar killed under acks=all produce: no send fails longer than its restart, the broker stays in its Service", s.kafkaSidecarKilled},
		{"kubectl rollout restart statefulset/kafka while consuming loses nothing", s.kafkaRolledOut},
		{"kafka-share-groups.sh from a pod agrees with kubectl sharestate describe", s.kafkaToolsAgree},
		{"what a pod's end costs, with our persister and with Kafka's own", s.podEndCosts},
		{"helm uninstall keeps the state", s.uninstallKeepsState},
	} {
		step(t, st.name, st.run)
	}
}

// session is what the steps of TestSystemInACluster hand on to the ones after them.
type session struct {
	broker         *corev1.Pod
	reader, nobody string // ServiceAccount tokens with and without the chart's metrics reader role
	sidecarMetrics string
	kafka          map[string]*corev1.Pod // §4's brokers' pods by name
}

// installOperator: helm install as the README says runs the operator.
func (s *session) installOperator(t *testing.T) {
	sh(t, readmeInstall(t))
	d := waitForDeployment(t, 1, 3*time.Minute)
	pods := operatorPods(t)
	if len(pods) != 1 || pods[0].Spec.ServiceAccountName != operatorName || d.Spec.Template.Spec.ServiceAccountName != operatorName {
		t.Fatalf("the operator runs as %v, want one pod under the chart's service account %s", pods, operatorName)
	}
	checkNoForbidden(t)
}

// sidecarInBrokerPod: the sidecar in a broker pod serves the stand-in broker.
func (s *session) sidecarInBrokerPod(t *testing.T) {
	logBrokerOnFailure(t)
	sh(t, "kubectl create serviceaccount "+brokerAccount+" -n "+brokerNamespace+"\n"+
		"kubectl apply -n "+brokerNamespace+" -f config/samples/sharestate_v1alpha1_sharegroup.yaml")
	if err := cl.Create(context.Background(), brokerStatefulSet(t)); err != nil {
		t.Fatal(err)
	}
	s.broker = readyPod(t, brokerNamespace, brokerPod, "", 3*time.Minute)
	// The sidecar's identity is the pod's, from the downward API: the leader recorded is this pod.
	eventually(t, 2*time.Minute, "the stand-in's partitions led by "+brokerPod, func() error { return ledBy(t, s.broker, nil) })
	checkNoForbidden(t)
}

// metricsSecured: the metrics endpoints as the chart secures them.
func (s *session) metricsSecured(t *testing.T) {
	s.reader, s.nobody = scrapers(t)
	checkSecured(t, operatorMetricsURL(t), "sharestate_", s.reader, s.nobody)
	s.sidecarMetrics = fmt.Sprintf("https://%s:%d/metrics", s.broker.Status.PodIP, 9088)
	checkSecured(t, s.sidecarMetrics, "sharestate_sidecar_requests_total", s.reader, s.nobody)
}

// servesEveryOperation: the sidecar serves API keys 83-87 on its pod's loopback.
func (s *session) servesEveryOperation(t *testing.T) {
	callEveryOperation(t, portForward(t, brokerNamespace, brokerPod, 9089))
	_, body, err := testenv.Scrape(s.sidecarMetrics, s.reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, api := range []string{"InitializeShareGroupState", "ReadShareGroupState", "WriteShareGroupState",
		"DeleteShareGroupState", "ReadShareGroupStateSummary"} {
		if !strings.Contains(body, `sharestate_sidecar_requests_total{api="`+api+`",error="NONE"}`) {
			t.Errorf("the sidecar's metrics count no %s answered NONE", api)
		}
	}
}

// readyWithoutAPIServer: the sidecar stays ready while the API server is out of its reach.
func (s *session) readyWithoutAPIServer(t *testing.T) {
	logBrokerOnFailure(t)
	const lost, back = "Kubernetes API server became unreachable", "Kubernetes API server became reachable"
	lostBefore, backBefore := sidecarLogCount(t, lost), sidecarLogCount(t, back)
	mend, err := kube.CutFromAPIServer(s.broker.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = mend() }()
	eventually(t, time.Minute, "the sidecar to notice", func() error {
		return sidecarLogged(lost, lostBefore)
	})
	// Three readiness periods (10 s each) with the API server out of reach: the pod stays Ready,
	// in its Service, as docs/operations.md says.
	for range 30 {
		if p := readyPod(t, brokerNamespace, brokerPod, "", time.Second); p.UID != s.broker.UID {
			t.Fatal("the pod was replaced")
		}
		time.Sleep(time.Second)
	}
	if err := mend(); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, "the sidecar to reach the API server again", func() error {
		return sidecarLogged(back, backBefore)
	})
	writes := writeCounts(t)
	eventually(t, time.Minute, "writes going on", func() error { return ledBy(t, s.broker, writes) })
}

// restartInPlaceNotFenced: a container killed and restarted in place is not fenced.
func (s *session) restartInPlaceNotFenced(t *testing.T) {
	for _, container := range []string{"broker", "sharestate-sidecar"} {
		before := restarts(s.broker, container)
		if err := kube.Ctr(context.Background(), "tasks", "kill", "--signal", "SIGKILL", containerID(s.broker, container)); err != nil {
			t.Fatal(err)
		}
		eventually(t, 2*time.Minute, container+" restarted by the kubelet", func() error {
			p := readyPod(t, brokerNamespace, brokerPod, "", 2*time.Minute)
			if p.UID != s.broker.UID {
				return fmt.Errorf("the pod was replaced (UID %s, was %s)", p.UID, s.broker.UID)
			}
			if restarts(p, container) <= before {
				return fmt.Errorf("%s has restarted %d times", container, restarts(p, container))
			}
			s.broker = p
			return nil
		})
		writes := writeCounts(t)
		eventually(t, time.Minute, "writes going on under the same leader", func() error { return ledBy(t, s.broker, writes) })
		for _, s := range groupStates(t) {
			if s.Status.FencedLeader != nil {
				t.Fatalf("partition %d was fenced (%+v) after the %s container restarted in place", s.Spec.Partition, s.Status.FencedLeader, container)
			}
		}
	}
}

// deletePodFences: kubectl delete pod fences its partitions; the recreated pod leads them.
func (s *session) deletePodFences(t *testing.T) {
	old := s.broker
	sh(t, "kubectl delete pod "+brokerPod+" -n "+brokerNamespace+" --wait=false")
	eventually(t, 2*time.Minute, "the old pod's partitions fenced", func() error { return fencedFrom(t, string(old.UID)) })
	s.broker = readyPod(t, brokerNamespace, brokerPod, string(old.UID), 3*time.Minute)
	eventually(t, 2*time.Minute, "the new pod leading", func() error { return ledBy(t, s.broker, nil) })
}

// describeGroup: kubectl sharestate describes the group.
func (s *session) describeGroup(t *testing.T) {
	out := sh(t, "kubectl sharestate describe group "+sampleGroup+" -n "+brokerNamespace)
	if !strings.Contains(out, brokerPod) {
		t.Fatalf("describe does not name the leader pod %s:\n%s", brokerPod, out)
	}
}

// twoReplicasTakeOver: two replicas: the other takes over when the leader's pod goes.
func (s *session) twoReplicasTakeOver(t *testing.T) {
	sh(t, "helm upgrade "+release+" charts/sharestate-operator -n "+releaseNamespace+" --reuse-values --set replicas=2")
	waitForDeployment(t, 2, 3*time.Minute)
	holder := leaseHolder(t)
	// The pod is deleted (SIGTERM, the lease released on the way out), and, while the other
	// replica takes over, the broker pod is replaced: its fence must still happen.
	sh(t, "kubectl delete pod "+holder+" -n "+releaseNamespace+" --wait=false")
	old := s.broker
	sh(t, "kubectl delete pod "+brokerPod+" -n "+brokerNamespace+" --wait=false")
	eventually(t, 15*time.Second, "another replica holding the lease", func() error {
		if h := leaseHolder(t); h == holder || h == "" {
			return fmt.Errorf("the lease is held by %q", h)
		}
		return nil
	})
	eventually(t, 2*time.Minute, "the broker's partitions fenced by the new leader", func() error { return fencedFrom(t, string(old.UID)) })
	s.broker = readyPod(t, brokerNamespace, brokerPod, string(old.UID), 3*time.Minute)
	eventually(t, 2*time.Minute, "the new broker pod leading", func() error { return ledBy(t, s.broker, nil) })
	waitForDeployment(t, 2, 3*time.Minute)
	checkNoForbidden(t)
}

// uninstallKeepsState: helm uninstall keeps the state: every SharePartitionState of the brokers'
// namespace. (Not the stand-in's sample group: §4's sidecars delete the state of topics their Kafka
// cluster does not have, as the stand-in's are, within minutes.)
func (s *session) uninstallKeepsState(t *testing.T) {
	states := func() int {
		var list sharestatev1.SharePartitionStateList
		if err := cl.List(context.Background(), &list, client.InNamespace(brokerNamespace)); err != nil {
			t.Fatal(err)
		}
		return len(list.Items)
	}
	before := states()
	sh(t, "helm uninstall "+release+" -n "+releaseNamespace)
	sh(t, "kubectl get crd sharepartitionstates.sharestate.dev sharegroups.sharestate.dev")
	if after := states(); after != before || after == 0 {
		t.Fatalf("%d partition states after helm uninstall, %d before", after, before)
	}
}

// step runs one step of the session as a subtest: a failed step ends the session, whose later steps
// build on it.
func step(t *testing.T, name string, f func(t *testing.T)) {
	t.Helper()
	if !t.Run(name, f) {
		t.FailNow()
	}
}

// logBrokerOnFailure saves the end of the broker pod's containers' logs when t fails.
func logBrokerOnFailure(t *testing.T) {
	logOnFailure(t, "the broker pod's logs", "for c in broker sharestate-sidecar; do echo \"--- $c\"; kubectl logs -n "+
		brokerNamespace+" "+brokerPod+" -c $c --tail 200; done")
}

// sidecarLogged returns nil once the broker pod's sidecar has logged msg more than n times since its
// last start.
func sidecarLogged(msg string, n int) error {
	out, err := trySh("kubectl logs -n " + brokerNamespace + " " + brokerPod + " -c sharestate-sidecar")
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	if got := strings.Count(out, msg); got <= n {
		return fmt.Errorf("the sidecar has logged %q %d times, want more than %d", msg, got, n)
	}
	return nil
}

// sidecarLogCount is how many times the broker pod's sidecar has logged msg since its last start.
func sidecarLogCount(t *testing.T, msg string) int {
	t.Helper()
	out, err := trySh("kubectl logs -n " + brokerNamespace + " " + brokerPod + " -c sharestate-sidecar")
	if err != nil {
		t.Fatalf("the sidecar's log: %v: %s", err, out)
	}
	return strings.Count(out, msg)
}

// leaseHolder is the operator replica that holds the leader-election Lease (its identity starts with
// the pod's name).
func leaseHolder(t *testing.T) string {
	t.Helper()
	var lease coordinationv1.Lease
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: leaseName}, &lease); err != nil {
		return ""
	}
	if lease.Spec.HolderIdentity == nil {
		return ""
	}
	name, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	return name
}
