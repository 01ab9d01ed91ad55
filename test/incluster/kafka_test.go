//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// Kafka in pods: docs/kafka-integration.md §4's StatefulSet of three brokers, applied as written but
// for its images, which are those `make test-cluster` builds (hack/kafka-image.sh), and a client pod
// and Jobs running the tests' ShareTool on Kafka's own clients.
const (
	kafkaSet       = "kafka"
	kafkaNodes     = 3
	kafkaClient    = "kafka-client"
	kafkaTopic     = "in-pods"
	kafkaGroup     = "in-pods-consumers"
	kafkaRecords   = 20000
	kafkaDataBytes = "10Gi" // §4's volumeClaimTemplates request
)

// kafkaBootstrap names every broker by its pod's DNS name under the headless Service, as §4's
// listeners advertise them.
var kafkaBootstrap = bootstrapOf(brokerNamespace)

// bootstrapOf is the bootstrap servers of §4's brokers in namespace ns.
func bootstrapOf(ns string) string {
	var names []string
	for i := range kafkaNodes {
		names = append(names, fmt.Sprintf("%s-%d.kafka-headless.%s.svc:9092", kafkaSet, i, ns))
	}
	return strings.Join(names, ",")
}

// kafkaBrokersRun: §4 applied as written runs three Kafka nodes, each with the sidecar in proxy mode.
// The stand-in broker goes first: it too serves broker id 0 in namespace kafka, and a broker id
// names one pod of a namespace.
func (s *session) kafkaBrokersRun(t *testing.T) {
	logKafkaOnFailure(t)
	sh(t, "kubectl delete statefulset "+brokerSet+" -n "+brokerNamespace+"\n"+
		"kubectl wait --for=delete pod/"+brokerPod+" -n "+brokerNamespace+" --timeout=2m")
	kafkaVolumes(t, "kafka-data")
	// Not in t.TempDir(), whose name holds the step's commas, which kubectl's -f splits at.
	manifest := filepath.Join(kube.Dir, "kafka.yaml")
	if err := os.WriteFile(manifest, []byte(kafkaManifest(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, "kubectl apply -f "+manifest)
	s.kafka = map[string]*corev1.Pod{}
	for i := range kafkaNodes {
		name := fmt.Sprintf("%s-%d", kafkaSet, i)
		s.kafka[name] = readyPod(t, brokerNamespace, name, "", 5*time.Minute)
	}
	startClientPod(t)
	// §4's checklist: share groups are on.
	out := sh(t, "kubectl exec -n kafka kafka-0 -c kafka -- /opt/kafka/bin/kafka-features.sh --bootstrap-server localhost:9092 describe")
	if m := regexp.MustCompile(`share\.version\s.*FinalizedVersionLevel:\s*(\d+)`).FindStringSubmatch(out); m == nil || m[1] == "0" {
		t.Fatalf("share.version is not finalized at 1 or above:\n%s", out)
	}
}

// kafkaConsumesOnce: 20,000 records on 3 partitions (RF 3), consumed by a share group in a Job, each
// accepted once; the state is in SharePartitionStates led by the partitions' leaders, and §4's
// checklist holds.
func (s *session) kafkaConsumesOnce(t *testing.T) {
	logKafkaOnFailure(t)
	shareTool(t, "setup", kafkaBootstrap, kafkaTopic, strconv.Itoa(kafkaNodes), strconv.Itoa(kafkaNodes), kafkaGroup)
	shareTool(t, "produce", kafkaBootstrap, kafkaTopic, strconv.Itoa(kafkaRecords))
	outcomes := consumeInJob(t, "consume-once")
	checkAcceptedOnce(t, outcomes, kafkaRecords)
	checkLeadersRecorded(t, s.kafka, kafkaTopic, kafkaGroup)
	checkShareGroupStateEmpty(t)
	checkSidecarsAnswered(t, s.kafka, s.reader)
	if out := sh(t, "kubectl get events -n kafka --field-selector reason=ProxyBypassed -o name"); strings.TrimSpace(out) != "" {
		t.Fatalf("a broker went around its proxy:\n%s", out)
	}
}

// kafkaVolumes makes the PersistentVolumes §4's volumeClaimTemplates claim: the cluster has no
// provisioner. Each is a directory of the node, owned by the image's user, since a hostPath volume
// is not given the pod's fsGroup.
func kafkaVolumes(t *testing.T, prefix string) {
	t.Helper()
	for i := range kafkaNodes {
		dir := filepath.Join(kube.Dir, "volumes", fmt.Sprintf("%s-%d", prefix, i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, 1000, 1000); err != nil {
			t.Fatal(err)
		}
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(kafkaDataBytes)},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: dir, Type: ptr.To(corev1.HostPathDirectory)}},
			},
		}
		if err := cl.Create(context.Background(), pv); err != nil {
			t.Fatal(err)
		}
	}
}

// kafkaManifest is §4's manifest with its two images replaced by those built here, and nothing else.
func kafkaManifest(t *testing.T) string {
	t.Helper()
	manifest, err := testenv.DocBlock(filepath.Join(testenv.RepoRoot(), "docs", "kafka-integration.md"), "broker-statefulset")
	if err != nil {
		t.Fatal(err)
	}
	kafka := regexp.MustCompile(`image: apache/kafka:(\S+)`)
	sidecar := regexp.MustCompile(`image: ghcr\.io/sharestate/sharestate-sidecar:\S+`)
	if len(kafka.FindAllString(manifest, -1)) != 1 || len(sidecar.FindAllString(manifest, -1)) != 1 {
		t.Fatalf("§4's manifest should name apache/kafka and the sidecar's image once each:\n%s", manifest)
	}
	manifest = kafka.ReplaceAllString(manifest, "image: "+imageRepo+"/kafka:$1")
	return sidecar.ReplaceAllString(manifest, "image: "+sidecarImage+":"+imageTag)
}

// kafkaVersion is the Kafka version §4's image names: the images built here are tagged with it.
func kafkaVersion(t *testing.T) string {
	t.Helper()
	m := regexp.MustCompile(`image: ` + regexp.QuoteMeta(imageRepo) + `/kafka:(\S+)`).FindStringSubmatch(kafkaManifest(t))
	return m[1]
}

// startClientPod starts a pod of Kafka's clients and ShareTool, for the commands a test runs.
func startClientPod(t *testing.T) {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: kafkaClient, Namespace: brokerNamespace},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{clientContainer(t, "sleep", "infinity")},
			TerminationGracePeriodSeconds: ptr.To[int64](1),
		},
	}
	if err := cl.Create(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	readyPod(t, brokerNamespace, kafkaClient, "", 2*time.Minute)
}

// clientContainer runs command in the image of Kafka's clients, as its non-root user.
func clientContainer(t *testing.T, command ...string) corev1.Container {
	return corev1.Container{
		Name:            "client",
		Image:           imageRepo + "/kafka-clients:" + kafkaVersion(t),
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         command,
		Env:             []corev1.EnvVar{{Name: "KAFKA_HEAP_OPTS", Value: "-Xmx256m"}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot:             ptr.To(true),
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}
}

// shareTool runs ShareTool in the client pod and returns what it printed.
func shareTool(t *testing.T, args ...string) string {
	t.Helper()
	return sh(t, "kubectl exec -n kafka "+kafkaClient+" -- /opt/kafka/bin/kafka-run-class.sh ShareTool "+strings.Join(args, " "))
}

// consumeInJob consumes kafkaTopic in kafkaGroup in a Job of one pod, until no record came for 15 s,
// and returns what the consumer acknowledged.
func consumeInJob(t *testing.T, name string) []kafkacluster.Outcome {
	t.Helper()
	startConsumerJob(t, name, kafkaTopic, kafkaGroup, 15*time.Second, 0)
	return jobOutcomes(t, name)
}

// startConsumerJob starts a Job of one pod that consumes topic in group, holding each poll's records
// for hold before it acknowledges them, until no record came for idle.
func startConsumerJob(t *testing.T, name, topic, group string, idle, hold time.Duration) {
	t.Helper()
	startJob(t, name, "consume", kafkaBootstrap, topic, group, "0", strconv.FormatInt(idle.Milliseconds(), 10),
		strconv.FormatInt(hold.Milliseconds(), 10))
}

// startJob starts a Job of one pod that runs ShareTool with args.
func startJob(t *testing.T, name string, args ...string) {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: brokerNamespace},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				Containers:    []corev1.Container{clientContainer(t, append([]string{"/opt/kafka/bin/kafka-run-class.sh", "ShareTool"}, args...)...)},
			}},
		},
	}
	if err := cl.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

// jobOutcomes waits for the consumer Job name to complete and returns what it acknowledged.
func jobOutcomes(t *testing.T, name string) []kafkacluster.Outcome {
	t.Helper()
	waitJob(t, name)
	sh(t, "kubectl logs -n kafka job/"+name+" | grep -v -e '^ACCEPTED ' -e '^FAILED ' || true\n"+
		"echo \"$(kubectl logs -n kafka job/"+name+" | grep -c '^FAILED ') acknowledgements failed\"")
	outcomes, _, err := kafkacluster.ParseOutcomes(strings.NewReader(jobLog(t, name)), name)
	if err != nil {
		t.Fatal(err)
	}
	return outcomes
}

// waitJob waits for the Job name to complete, fails t if it failed, and returns name.
func waitJob(t *testing.T, name string) string {
	t.Helper()
	job := &batchv1.Job{}
	eventually(t, 10*time.Minute, "Job "+name+" to complete", func() error {
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: brokerNamespace, Name: name}, job); err != nil {
			return err
		}
		switch {
		case job.Status.Succeeded > 0:
			return nil
		case job.Status.Failed > 0:
			t.Fatalf("Job %s failed: %s", name, jobFailure(name))
		}
		return fmt.Errorf("running: %d active", job.Status.Active)
	})
	return name
}

// jobFailure says how the pod of the failed Job name ended, and what it printed last.
func jobFailure(name string) string {
	status, _ := trySh("kubectl get pods -n kafka -l job-name=" + name + " -o jsonpath=" +
		"'{range .items[*]}pod {.metadata.name}: {.status.phase} {.status.reason} {.status.message}" +
		"{range .status.containerStatuses[*]}; exit code {.state.terminated.exitCode} {.state.terminated.reason}{end}{end}'")
	tail, _ := trySh("kubectl logs -n kafka job/" + name + " --tail=8")
	return strings.TrimSpace(status) + "; its last lines:\n" + tail
}

// jobLog is what the Job's pod printed so far.
func jobLog(t *testing.T, name string) string {
	t.Helper()
	out, err := trySh("kubectl logs -n kafka job/" + name)
	if err != nil {
		t.Fatalf("the log of Job %s: %v\n%s", name, err, out)
	}
	return out
}

// checkAcceptedOnce fails t unless each of the records offsets 0.. of every partition, count in all,
// was accepted exactly once.
func checkAcceptedOnce(t *testing.T, outcomes []kafkacluster.Outcome, count int) {
	t.Helper()
	accepted := map[[2]int64]int{}
	for _, o := range outcomes {
		if o.Action == "ACCEPTED" {
			accepted[[2]int64{int64(o.Partition), o.Offset}]++
		}
	}
	ends := endOffsets(t, kafkaTopic)
	total := 0 // of kafkaTopic
	for p, end := range ends {
		total += int(end)
		for off := range end {
			if n := accepted[[2]int64{int64(p), off}]; n != 1 {
				t.Errorf("partition %d offset %d accepted %d times, want once", p, off, n)
			}
		}
	}
	if total != count || len(accepted) != count {
		t.Fatalf("%d records on the topic and %d accepted, want %d of each", total, len(accepted), count)
	}
}

// endOffsets are the topic's partitions' end offsets, as §4's kafka-get-offsets.sh prints them.
func endOffsets(t *testing.T, topic string) map[int32]int64 {
	t.Helper()
	return endOffsetsIn(t, brokerNamespace, topic)
}

// endOffsetsIn are the end offsets of topic's partitions on §4's brokers in namespace ns.
func endOffsetsIn(t *testing.T, ns, topic string) map[int32]int64 {
	t.Helper()
	out := sh(t, "kubectl exec -n "+ns+" kafka-0 -c kafka -- /opt/kafka/bin/kafka-get-offsets.sh --bootstrap-server localhost:9092 --topic "+topic)
	ends := map[int32]int64{}
	for line := range strings.Lines(out) {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 || f[0] != topic {
			continue
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		end, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("kafka-get-offsets.sh printed %q", line)
		}
		ends[int32(p)] = end
	}
	return ends
}

// checkLeadersRecorded fails t unless each partition's SharePartitionState names the broker that
// leads the partition (Admin describeTopics, through ShareTool), with that broker's pod's name and UID.
func checkLeadersRecorded(t *testing.T, brokers map[string]*corev1.Pod, topic, group string) {
	t.Helper()
	leaders := kafkaLeaders(t, topic)
	var list sharestatev1.SharePartitionStateList
	if err := cl.List(context.Background(), &list, client.InNamespace(brokerNamespace)); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, sps := range list.Items {
		if string(sps.Spec.GroupID) != group {
			continue
		}
		seen++
		want, ok := leaders[sps.Spec.Partition]
		pod := brokers[fmt.Sprintf("%s-%d", kafkaSet, want)]
		l := sps.Status.Leader
		switch {
		case !ok || pod == nil:
			t.Errorf("partition %d has no leader in Kafka's metadata (%v)", sps.Spec.Partition, leaders)
		case l == nil:
			t.Errorf("partition %d records no leader", sps.Spec.Partition)
		case l.BrokerID != want || l.PodName != pod.Name || l.PodUID != string(pod.UID):
			t.Errorf("partition %d records broker %d, pod %s/%s; Kafka's leader is broker %d, pod %s/%s",
				sps.Spec.Partition, l.BrokerID, l.PodName, l.PodUID, want, pod.Name, pod.UID)
		}
	}
	if seen != kafkaNodes {
		t.Fatalf("%d SharePartitionStates of group %s, want one per partition (%d)", seen, group, kafkaNodes)
	}
}

// kafkaLeaders is each partition's leader, by Admin describeTopics (through ShareTool).
func kafkaLeaders(t *testing.T, topic string) map[int32]int32 {
	t.Helper()
	leaders := map[int32]int32{}
	for line := range strings.Lines(shareTool(t, "leaders", kafkaBootstrap, topic)) {
		var p, leader, isr int32
		if n, _ := fmt.Sscanf(line, "LEADER %d %d ISR %d", &p, &leader, &isr); n == 3 {
			leaders[p] = leader
		}
	}
	return leaders
}

// checkShareGroupStateEmpty fails t unless every partition of __share_group_state is at offset 0:
// Kafka's own persister wrote nothing (§4's checklist).
func checkShareGroupStateEmpty(t *testing.T) {
	t.Helper()
	ends := endOffsets(t, "__share_group_state")
	if len(ends) == 0 {
		t.Fatal("no partition of __share_group_state: the brokers' persister finds its coordinator by it")
	}
	for p, end := range ends {
		if end != 0 {
			t.Errorf("__share_group_state partition %d is at offset %d: Kafka's own persister wrote to it", p, end)
		}
	}
}

// checkSidecarsAnswered fails t unless the sidecars answered Writes without error and their proxies
// answered share-state requests (§4's checklist), scraped with the metrics reader's token.
func checkSidecarsAnswered(t *testing.T, brokers map[string]*corev1.Pod, reader string) {
	t.Helper()
	writes, answered := 0.0, 0.0
	for _, pod := range brokers {
		code, body, err := testenv.Scrape(fmt.Sprintf("https://%s:%d/metrics", pod.Status.PodIP, 9088), reader)
		if err != nil || code != 200 {
			t.Fatalf("the sidecar's metrics of %s: %d %v", pod.Name, code, err)
		}
		writes += metricSum(body, "sharestate_sidecar_requests_total", `api="WriteShareGroupState"`, `error="NONE"`)
		answered += metricSum(body, "sharestate_proxy_requests_total", `route="answered"`)
	}
	if writes == 0 || answered == 0 {
		t.Fatalf("the sidecars answered %v Writes without error and their proxies %v requests, want some of each", writes, answered)
	}
	t.Logf("the sidecars answered %v Writes; their proxies answered %v share-state requests", writes, answered)
}

// metricSum adds up the samples of metric whose labels hold every one of labels.
func metricSum(body, metric string, labels ...string) float64 {
	sum := 0.0
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(line, metric+"{") {
			continue
		}
		matches := true
		for _, l := range labels {
			matches = matches && strings.Contains(line, l)
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil && matches {
			sum += v
		}
	}
	return sum
}

// logKafkaOnFailure saves the pods of namespace kafka and the ends of the brokers' logs when t fails.
func logKafkaOnFailure(t *testing.T) {
	logOnFailure(t, "namespace kafka at the failure", "kubectl get pods,pvc,jobs -n kafka -o wide\n"+
		"for p in kafka-0 kafka-1 kafka-2; do echo \"== $p\"; kubectl logs -n kafka $p -c kafka --tail=200; kubectl logs -n kafka $p -c sharestate-sidecar --tail=50; done")
}
