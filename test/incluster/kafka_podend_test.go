//go:build cluster

package incluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What a pod's end costs: `kubectl delete pod` of a partition's leader (SIGTERM, the broker's
// controlled shutdown) while Kafka's producer sends and a share consumer receives, timed from the
// delete to the consumer's first record of the partition from its new leader. Measured on §4's
// brokers (our persister), then on the same StatefulSet without the sidecars in namespace kafka-own
// (Kafka's own persister, __share_group_state), one after the other on the same node.
const (
	ownNamespace    = "kafka-own"
	podEndTopic     = "pod-end"
	podEndGroup     = "pod-end-consumers"
	podEndRate      = 150 // records a second, over the topic's 3 partitions
	podEndTrialsEnv = "CLUSTER_POD_END_TRIALS"
)

// podEndCosts: what a pod's end costs with our persister and with Kafka's own. Each trial is
// logged; the medians and their ratio are the result. Trials: $CLUSTER_POD_END_TRIALS, 1 unless
// set. No bound is asserted: the figure is a measurement, not a test.
func (s *session) podEndCosts(t *testing.T) {
	logKafkaOnFailure(t)
	trials := 1
	if v := os.Getenv(podEndTrialsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of trials, 1 or more", podEndTrialsEnv, v)
		}
		trials = n
	}
	ours := measurePodEnds(t, brokerNamespace, "ours", trials)
	sh(t, "kubectl scale statefulset/"+kafkaSet+" -n "+brokerNamespace+" --replicas=0\n"+
		"kubectl wait --for=delete pod -l app=kafka -n "+brokerNamespace+" --timeout=3m")
	startKafkasOwn(t)
	kafkas := measurePodEnds(t, ownNamespace, "kafkas", trials)
	if ends := endOffsetsIn(t, ownNamespace, "__share_group_state"); sumOffsets(ends) == 0 {
		t.Fatalf("__share_group_state of %s holds nothing: its brokers did not use Kafka's own persister", ownNamespace)
	}
	o, k := median(ours), median(kafkas)
	t.Logf("a pod's end, from kubectl delete to the new leader's first delivery (median of %d): ours %.2fs, Kafka's own %.2fs: %.2f×",
		trials, o.Seconds(), k.Seconds(), o.Seconds()/k.Seconds())
}

// measurePodEnds runs trials pod ends on the brokers of namespace ns and returns their costs.
func measurePodEnds(t *testing.T, ns, name string, trials int) []time.Duration {
	t.Helper()
	bootstrap := bootstrapOf(ns)
	shareTool(t, "setup", bootstrap, podEndTopic, strconv.Itoa(kafkaNodes), strconv.Itoa(kafkaNodes), podEndGroup)
	producer, consumer := "pod-end-producer-"+name, "pod-end-consumer-"+name
	startJob(t, producer, "produce-loop", bootstrap, podEndTopic, "3600", strconv.Itoa(podEndRate))
	startJob(t, consumer, "timed-consume", bootstrap, podEndTopic, podEndGroup)
	defer sh(t, "kubectl delete job -n "+brokerNamespace+" "+producer+" "+consumer+" --wait=false")
	var costs []time.Duration
	for trial := range trials {
		awaitDeliveries(t, consumer, 2*time.Minute)
		victim := leaderPodAt(t, bootstrap, podEndTopic, 0)
		old := readyPod(t, ns, victim, "", time.Minute)
		deleted := time.Now()
		sh(t, "kubectl delete pod "+victim+" -n "+ns+" --wait=false")
		readyPod(t, ns, victim, string(old.UID), 5*time.Minute)
		// Deliveries again, 5 s after the delete at least: the pause is over.
		for time.Since(deleted) < 5*time.Second {
			time.Sleep(time.Second)
		}
		awaitDeliveries(t, consumer, 3*time.Minute)
		arrivals, err := deliveries(consumer, deleted.Add(-time.Second))
		if err != nil {
			t.Fatal(err)
		}
		cost, pause := podEndCost(arrivals, deleted)
		t.Logf("%s, trial %d: %s deleted; the new leader's first delivery of partition 0 %.2fs after the delete (the longest pause %.2fs)",
			name, trial+1, victim, cost.Seconds(), pause.Seconds())
		costs = append(costs, cost)
		awaitInSync(t, bootstrap, podEndTopic)
	}
	return costs
}

// podEndCost is the time from deleted to the end of the longest pause in partition 0's deliveries
// after it (the new leader's first delivery), and that pause. arrivals are sorted.
func podEndCost(arrivals []time.Time, deleted time.Time) (cost, pause time.Duration) {
	prev := deleted
	var end time.Time
	for _, at := range arrivals {
		if at.Before(deleted) {
			continue
		}
		if d := at.Sub(prev); d > pause {
			pause, end = d, at
		}
		prev = at
	}
	if end.IsZero() {
		return 0, 0
	}
	return end.Sub(deleted), pause
}

// deliveries are the times the timed consumer of Job job received a record of partition 0 since
// since (ShareTool timed-consume prints "<ms> <partition> <offset> <delivery count>" per record).
func deliveries(job string, since time.Time) ([]time.Time, error) {
	out, err := trySh("kubectl logs -n " + brokerNamespace + " job/" + job + " --since-time=" + since.UTC().Format(time.RFC3339))
	if err != nil {
		return nil, fmt.Errorf("the log of Job %s: %w: %s", job, err, out)
	}
	var at []time.Time
	for line := range strings.Lines(out) {
		var ms, offset int64
		var partition, count int32
		if n, _ := fmt.Sscanf(line, "%d %d %d %d", &ms, &partition, &offset, &count); n == 4 && partition == 0 && !time.UnixMilli(ms).Before(since) {
			at = append(at, time.UnixMilli(ms))
		}
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	return at, nil
}

// awaitDeliveries waits until the timed consumer of Job job received records of partition 0 in the
// last 2 seconds.
func awaitDeliveries(t *testing.T, job string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "deliveries of partition 0 to "+job, func() error {
		at, err := deliveries(job, time.Now().Add(-2*time.Second))
		if err != nil {
			return err
		}
		if len(at) == 0 {
			return fmt.Errorf("none in the last 2 s")
		}
		return nil
	})
}

// leaderPodAt is the name of the pod whose broker leads partition of topic, asking bootstrap.
func leaderPodAt(t *testing.T, bootstrap, topic string, partition int32) string {
	t.Helper()
	for line := range strings.Lines(shareTool(t, "leaders", bootstrap, topic)) {
		var p, leader, isr int32
		if n, _ := fmt.Sscanf(line, "LEADER %d %d ISR %d", &p, &leader, &isr); n == 3 && p == partition && leader >= 0 {
			return fmt.Sprintf("%s-%d", kafkaSet, leader)
		}
	}
	t.Fatalf("partition %d of %s has no leader", partition, topic)
	return ""
}

// awaitInSync waits until every partition of topic has a leader and all its replicas in sync.
func awaitInSync(t *testing.T, bootstrap, topic string) {
	t.Helper()
	eventually(t, 3*time.Minute, topic+" in sync", func() error {
		for line := range strings.Lines(shareTool(t, "leaders", bootstrap, topic)) {
			var p, leader, isr int32
			if n, _ := fmt.Sscanf(line, "LEADER %d %d ISR %d", &p, &leader, &isr); n == 3 && (leader < 0 || isr < kafkaNodes) {
				return fmt.Errorf("partition %d: leader %d, %d in sync", p, leader, isr)
			}
		}
		return nil
	})
}

// startKafkasOwn runs §4's StatefulSet without the sidecars in namespace kafka-own: the brokers'
// inter-broker listener is advertised as is, and their persister is Kafka's own.
func startKafkasOwn(t *testing.T) {
	t.Helper()
	sh(t, "kubectl create namespace "+ownNamespace)
	kafkaVolumes(t, "kafka-own-data")
	manifest := filepath.Join(kube.Dir, "kafka-own.yaml")
	if err := os.WriteFile(manifest, []byte(kafkasOwnManifest(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, "kubectl apply -f "+manifest)
	for i := range kafkaNodes {
		readyPod(t, ownNamespace, fmt.Sprintf("%s-%d", kafkaSet, i), "", 5*time.Minute)
	}
}

// kafkasOwnManifest is §4's manifest in namespace kafka-own, without the sidecar, the broker's
// REPLICATION listener on the port the proxy had.
func kafkasOwnManifest(t *testing.T) string {
	t.Helper()
	m := kafkaManifest(t)
	replace := func(old, new string, want int) {
		if n := strings.Count(m, old); n != want {
			t.Fatalf("§4's manifest holds %q %d times, want %d", old, n, want)
		}
		m = strings.ReplaceAll(m, old, new)
	}
	replace("  namespace: "+brokerNamespace+"\n", "  namespace: "+ownNamespace+"\n", 3)
	replace("REPLICATION://127.0.0.1:19091", "REPLICATION://0.0.0.0:9091", 1)
	i, j := strings.Index(m, "      initContainers:\n"), strings.Index(m, "      containers:\n")
	if i < 0 || j < i {
		t.Fatalf("§4's manifest has no initContainers before its containers:\n%s", m)
	}
	return m[:i] + m[j:]
}

func sumOffsets(ends map[int32]int64) int64 {
	var sum int64
	for _, e := range ends {
		sum += e
	}
	return sum
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
