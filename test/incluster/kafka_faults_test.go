//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// kafkaBrokerKilled: the broker container of a partition's leader killed (SIGKILL) while a share
// group consumes. The kubelet restarts it in place and the pod keeps its UID, so the operator fences
// nothing: it fences a recorded leader whose pod is deleted, replaced, terminating or finished
// (docs/semantics.md, "Stale leaders"), and a restarted container is none of these. Kafka's
// controller moves the partitions' leadership at a higher leader epoch, which is what shuts the dead
// leader out, and no acceptance is lost.
func (s *session) kafkaBrokerKilled(t *testing.T) {
	logKafkaOnFailure(t)
	const topic, group, job = "in-pods-kill", "in-pods-kill-consumers", "consume-kill"
	shareTool(t, "setup", kafkaBootstrap, topic, strconv.Itoa(kafkaNodes), strconv.Itoa(kafkaNodes), group)
	shareTool(t, "produce", kafkaBootstrap, topic, strconv.Itoa(kafkaRecords))
	startConsumerJob(t, job, topic, group, 30*time.Second, 100*time.Millisecond)
	waitAccepted(t, job, 2000)
	victim := s.kafka[leaderPod(t, topic, 0)]
	before := restarts(victim, "kafka")
	killed := time.Now()
	if err := kube.Ctr(context.Background(), "tasks", "kill", "--signal", "SIGKILL", containerID(victim, "kafka")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, victim.Name+"'s broker restarted in place", func() error {
		p := readyPod(t, brokerNamespace, victim.Name, "", 3*time.Minute)
		if p.UID != victim.UID {
			t.Fatalf("%s was replaced (UID %s, was %s): the kubelet should restart the container in place", victim.Name, p.UID, victim.UID)
		}
		if restarts(p, "kafka") <= before {
			return fmt.Errorf("the broker has restarted %d times", restarts(p, "kafka"))
		}
		s.kafka[victim.Name] = p
		return nil
	})
	t.Logf("%s's broker (the leader of partition 0) was killed and restarted in place, its pod Ready again %.1fs later",
		victim.Name, time.Since(killed).Seconds())
	checkAcceptanceKept(t, jobOutcomes(t, job), endOffsets(t, topic))
	checkNotFenced(t, group)
	checkLeadersRecorded(t, s.kafka, topic, group)
}

// kafkaSidecarKilled: the sidecar of a partition's leader killed (SIGKILL) while Kafka's producer
// sends with acks=all. The kubelet restarts it in place; no send fails for longer than the restart
// took (and a margin), and the broker's address never leaves its headless Service, which publishes
// it Ready or not (docs/operations.md, "The sidecar's readiness").
func (s *session) kafkaSidecarKilled(t *testing.T) {
	logKafkaOnFailure(t)
	const (
		topic, job = "in-pods-produce", "produce-through-restart"
		produceFor = 60 * time.Second
		perSecond  = 150
		// A failure stretch may outlast the restart by what one produce round trip and its retry
		// backoff take on two busy cores (test/kafka's TestSidecarRestartUnderProduce).
		margin = 5 * time.Second
	)
	shareTool(t, "setup", kafkaBootstrap, topic, strconv.Itoa(kafkaNodes), strconv.Itoa(kafkaNodes), topic+"-consumers")
	startJob(t, job, "produce-loop", kafkaBootstrap, topic, strconv.Itoa(int(produceFor.Seconds())), strconv.Itoa(perSecond))
	eventually(t, 3*time.Minute, "the producer to have 500 sends acknowledged", func() error {
		log, err := trySh("kubectl logs -n kafka job/" + job)
		if err != nil {
			return fmt.Errorf("%w: %s", err, log)
		}
		if n := strings.Count(log, "\nACKED "); n < 500 {
			return fmt.Errorf("%d acknowledged", n)
		}
		return nil
	})
	victim := s.kafka[leaderPod(t, topic, 0)]
	const sidecar = "sharestate-sidecar"
	before := restarts(victim, sidecar)
	killed := time.Now()
	if err := kube.Ctr(context.Background(), "tasks", "kill", "--signal", "SIGKILL", containerID(victim, sidecar)); err != nil {
		t.Fatal(err)
	}
	restart := watchRestartInService(t, victim, sidecar, before, killed)
	t.Logf("%s's sidecar (the leader of partition 0's) was killed; started again (its startup probe passed) %v later, its address in the Service throughout",
		victim.Name, restart.Round(time.Millisecond))
	res, err := kafkacluster.ParseProduceResult(strings.NewReader(jobLog(t, waitJob(t, job))))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Done {
		t.Fatal("the producer printed no summary")
	}
	t.Logf("producer: %d sent, %d acknowledged, %d failed; longest stretch of failures %v, longest wait for an acknowledgement %v",
		res.Sent, res.AckedCount, res.Failed, res.LongestFailure, res.MaxAck)
	for i, f := range res.Failures[:min(10, len(res.Failures))] {
		t.Logf("failed send %d: %s", i, f)
	}
	if res.AckedCount+res.Failed != res.Sent {
		t.Errorf("%d sends, %d acknowledged and %d failed: some send was never answered", res.Sent, res.AckedCount, res.Failed)
	}
	if res.LongestFailure > restart+margin {
		t.Errorf("sends failed for %v in a row, longer than the sidecar's restart (%v) and %v", res.LongestFailure, restart, margin)
	}
}

// watchRestartInService waits until the kubelet has restarted container of pod and its startup probe
// has passed, and returns how long after killed that was. Every 100 ms meanwhile the pod's address
// must be in the headless Service's EndpointSlices, ready.
func watchRestartInService(t *testing.T, pod *corev1.Pod, container string, before int32, killed time.Time) time.Duration {
	t.Helper()
	deadline := killed.Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if err := inService(pod); err != nil {
			t.Fatalf("%v after the kill of its %s: %v", time.Since(killed).Round(time.Millisecond), container, err)
		}
		var p corev1.Pod
		if err := cl.Get(context.Background(), client.ObjectKeyFromObject(pod), &p); err != nil {
			t.Fatal(err)
		}
		if p.UID != pod.UID {
			t.Fatalf("%s was replaced: the kubelet should restart its %s in place", pod.Name, container)
		}
		if restarts(&p, container) > before && started(&p, container) {
			return time.Since(killed)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s's %s did not start again within 2 minutes", pod.Name, container)
	return 0
}

// inService returns nil when pod's address is a ready endpoint of §4's headless Service.
func inService(pod *corev1.Pod) error {
	var slices discoveryv1.EndpointSliceList
	if err := cl.List(context.Background(), &slices, client.InNamespace(pod.Namespace),
		client.MatchingLabels{discoveryv1.LabelServiceName: "kafka-headless"}); err != nil {
		return err
	}
	for _, sl := range slices.Items {
		for _, ep := range sl.Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.UID != pod.UID {
				continue
			}
			if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
				return fmt.Errorf("%s is an endpoint of kafka-headless, not ready", pod.Name)
			}
			return nil
		}
	}
	return fmt.Errorf("%s is not an endpoint of kafka-headless", pod.Name)
}

// started is whether container of pod runs and has passed its startup probe.
func started(pod *corev1.Pod, container string) bool {
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if cs.Name == container {
			return cs.State.Running != nil && cs.Started != nil && *cs.Started
		}
	}
	return false
}

// kafkaRolledOut: `kubectl rollout restart statefulset/kafka` while Kafka's producer sends and a
// share group consumes, both from before the rollout to after it: the StatefulSet replaces the pods
// one by one, each a new UID; every record written is accepted and none accepted is delivered
// again, and the operator fences only what the replaced pods were still recorded as leading, which
// their successors then lead.
func (s *session) kafkaRolledOut(t *testing.T) {
	logKafkaOnFailure(t)
	const topic, group, job, producer = "in-pods-rollout", "in-pods-rollout-consumers", "consume-rollout", "produce-rollout"
	shareTool(t, "setup", kafkaBootstrap, topic, strconv.Itoa(kafkaNodes), strconv.Itoa(kafkaNodes), group)
	// 90 s at 150 a second: the rollout begins some 15 s in and replaces a pod once the broker of the
	// one before is unfenced (§4's readiness probe), 15 to 25 s a pod here.
	startJob(t, producer, "produce-loop", kafkaBootstrap, topic, "90", "150")
	// Idle for a minute before it gives up: a pod replaced comes back at a new address, and the
	// consumer's JVM keeps a name's old address for 30 s (the JDK's networkaddress.cache.ttl
	// without a security manager, conf/security/java.security). The last pod replaced often leads
	// every partition and coordinates the group: the consumer then receives nothing until its
	// cache expires.
	startConsumerJob(t, job, topic, group, time.Minute, 100*time.Millisecond)
	waitAccepted(t, job, 2000)
	old := map[string]bool{}
	for _, p := range s.kafka {
		old[string(p.UID)] = true
	}
	began := time.Now()
	sh(t, "kubectl rollout restart statefulset/"+kafkaSet+" -n "+brokerNamespace+"\n"+
		"kubectl rollout status statefulset/"+kafkaSet+" -n "+brokerNamespace+" --timeout=10m")
	for name, p := range s.kafka {
		s.kafka[name] = readyPod(t, brokerNamespace, name, string(p.UID), 5*time.Minute)
	}
	t.Logf("the rolling restart replaced the three pods in %.1fs", time.Since(began).Seconds())
	res, err := kafkacluster.ParseProduceResult(strings.NewReader(jobLog(t, waitJob(t, producer))))
	if err != nil || !res.Done {
		t.Fatalf("the producer's summary: %v (printed: %v)", err, res.Done)
	}
	t.Logf("producer: %d sent, %d acknowledged, %d failed (a failed send may still be written: every record on the topic must be accepted)",
		res.Sent, res.AckedCount, res.Failed)
	checkAcceptanceKept(t, jobOutcomes(t, job), endOffsets(t, topic))
	checkFencedOnlyFrom(t, group, old)
	checkLeadersRecorded(t, s.kafka, topic, group)
	checkShareGroupStateEmpty(t)
}

// waitAccepted waits until the consumer Job job has printed n acceptances.
func waitAccepted(t *testing.T, job string, n int) {
	t.Helper()
	eventually(t, 5*time.Minute, fmt.Sprintf("the consumer to accept %d records", n), func() error {
		log, err := trySh("kubectl logs -n kafka job/" + job)
		if err != nil {
			return fmt.Errorf("%w: %s", err, log) // not started yet
		}
		if got := strings.Count(log, "\nACCEPTED "); got < n {
			return fmt.Errorf("%d accepted", got)
		}
		return nil
	})
}

// leaderPod is the name of the pod whose broker leads partition of topic.
func leaderPod(t *testing.T, topic string, partition int32) string {
	t.Helper()
	leader, ok := kafkaLeaders(t, topic)[partition]
	if !ok || leader < 0 {
		t.Fatalf("partition %d of %s has no leader", partition, topic)
	}
	return fmt.Sprintf("%s-%d", kafkaSet, leader)
}

// checkNotFenced fails t when a partition of group is fenced now or was fenced from a leader.
func checkNotFenced(t *testing.T, group string) {
	t.Helper()
	for _, sps := range groupPartitionStates(t, group) {
		if f := sps.Status.FencedLeader; f != nil {
			t.Errorf("partition %d was fenced from %s/%s", sps.Spec.Partition, f.PodName, f.PodUID)
		}
		if c := fencedCondition(&sps); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("partition %d is fenced: %s", sps.Spec.Partition, c.Message)
		}
	}
}

// groupPartitionStates are the SharePartitionStates of group in the brokers' namespace.
func groupPartitionStates(t *testing.T, group string) []sharestatev1.SharePartitionState {
	t.Helper()
	var list sharestatev1.SharePartitionStateList
	if err := cl.List(context.Background(), &list, client.InNamespace(brokerNamespace)); err != nil {
		t.Fatal(err)
	}
	var mine []sharestatev1.SharePartitionState
	for _, sps := range list.Items {
		if string(sps.Spec.GroupID) == group {
			mine = append(mine, sps)
		}
	}
	return mine
}
