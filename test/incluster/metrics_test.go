//go:build cluster

package incluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// scrapers makes two service accounts and returns a token of each: one bound to the chart's metrics
// reader role, one bound to nothing.
func scrapers(t *testing.T) (reader, nobody string) {
	t.Helper()
	sh(t, "kubectl create serviceaccount scraper -n "+releaseNamespace+"\n"+
		"kubectl create serviceaccount nobody -n "+releaseNamespace+"\n"+
		"kubectl create clusterrolebinding scraper --clusterrole="+operatorName+"-metrics-reader --serviceaccount="+releaseNamespace+":scraper")
	token := func(account string) string {
		out, err := exec.Command("kubectl", "--kubeconfig", kube.Kubeconfig, "create", "token", account, "-n", releaseNamespace).Output()
		if err != nil {
			t.Fatalf("a token of %s: %v", account, err)
		}
		return strings.TrimSpace(string(out))
	}
	return token("scraper"), token("nobody")
}

// checkSecured checks that url answers the reader's token with metrics named prefix, and refuses a
// request without a token (401) and the token of an account without the role (403).
func checkSecured(t *testing.T, url, prefix, reader, nobody string) string {
	t.Helper()
	var body string
	eventually(t, time.Minute, "metrics at "+url, func() error {
		code, b, err := testenv.Scrape(url, reader)
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.Contains(b, prefix) {
			return fmt.Errorf("%d, and %d bytes without %s", code, len(b), prefix)
		}
		body = b
		return nil
	})
	for _, c := range []struct {
		token string
		want  int
	}{{"", http.StatusUnauthorized}, {nobody, http.StatusForbidden}} {
		if code, _, err := testenv.Scrape(url, c.token); err != nil || code != c.want {
			t.Errorf("%s with token %.10q...: %d (%v), want %d", url, c.token, code, err, c.want)
		}
	}
	return body
}

// operatorMetricsURL is the operator's metrics Service, reached at its cluster IP through kube-proxy.
func operatorMetricsURL(t *testing.T) string {
	t.Helper()
	var svc corev1.Service
	if err := cl.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: operatorName + "-metrics"}, &svc); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("https://%s:%d/metrics", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port)
}

// portForward forwards a local port to the pod's port, through the API server and the kubelet, as
// `kubectl port-forward` does for a user, and returns the local address.
func portForward(t *testing.T, namespace, pod string, port int) string {
	t.Helper()
	cmd := exec.Command("kubectl", "--kubeconfig", kube.Kubeconfig, "port-forward", "--address=127.0.0.1", "-n", namespace, "pod/"+pod, fmt.Sprintf(":%d", port))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(stdout)
	// "Forwarding from 127.0.0.1:43215 -> 9089"
	for lines.Scan() {
		if f := strings.Fields(lines.Text()); len(f) >= 3 && f[0] == "Forwarding" {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return f[2]
		}
	}
	_ = cmd.Wait()
	t.Fatalf("kubectl port-forward said nothing of a local port: %v\n%s", lines.Err(), stderr.String())
	return ""
}

// callEveryOperation sends each of the five operations (API keys 83-87) to the sidecar at address,
// for a partition the stand-in does not lead, and fails t on an answer other than NONE.
func callEveryOperation(t *testing.T, address string) {
	t.Helper()
	c, err := kafkawire.NewClient(kafkawire.ClientOptions{Address: address, ClientID: "incluster-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	topic, err := sharestate.ParseTopicID("q1Sh0o2QRbuBzMz8vEMbvQ") // the sample group's topic
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const p = 11
	check := func(op string, results []sharestate.PartitionResult) {
		if len(results) != 1 || results[0].ErrorCode != sharestate.ErrNone {
			t.Fatalf("%s: %+v", op, results)
		}
	}
	init := c.Initialize(ctx, sharestate.InitializeRequest{GroupID: sampleGroupID, Topics: []sharestate.TopicData[sharestate.InitializePartition]{{
		TopicID: topic, Partitions: []sharestate.InitializePartition{{Partition: p, StateEpoch: 1, StartOffset: 0}}}}})
	check("Initialize", results(init.Topics, func(r sharestate.PartitionResult) sharestate.PartitionResult { return r }))
	read := c.Read(ctx, sharestate.ReadRequest{GroupID: sampleGroupID, Topics: []sharestate.TopicData[sharestate.ReadPartition]{{
		TopicID: topic, Partitions: []sharestate.ReadPartition{{Partition: p, LeaderEpoch: 1}}}}})
	check("Read", results(read.Topics, func(r sharestate.ReadResult) sharestate.PartitionResult { return r.PartitionResult }))
	write := c.Write(ctx, sharestate.WriteRequest{GroupID: sampleGroupID, Topics: []sharestate.TopicData[sharestate.WritePartition]{{
		TopicID: topic, Partitions: []sharestate.WritePartition{{Partition: p, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 0, DeliveryCompleteCount: -1,
			StateBatches: []sharestate.StateBatch{{FirstOffset: 0, LastOffset: 9, DeliveryState: 2, DeliveryCount: 1}}}}}}})
	check("Write", results(write.Topics, func(r sharestate.PartitionResult) sharestate.PartitionResult { return r }))
	summary := c.ReadSummary(ctx, sharestate.ReadSummaryRequest{GroupID: sampleGroupID, Topics: []sharestate.TopicData[sharestate.ReadSummaryPartition]{{
		TopicID: topic, Partitions: []sharestate.ReadSummaryPartition{{Partition: p, LeaderEpoch: 1}}}}})
	check("ReadSummary", results(summary.Topics, func(r sharestate.ReadSummaryResult) sharestate.PartitionResult { return r.PartitionResult }))
	del := c.Delete(ctx, sharestate.DeleteRequest{GroupID: sampleGroupID, Topics: []sharestate.TopicData[sharestate.DeletePartition]{{
		TopicID: topic, Partitions: []sharestate.DeletePartition{{Partition: p}}}}})
	check("Delete", results(del.Topics, func(r sharestate.PartitionResult) sharestate.PartitionResult { return r }))
}

func results[R any](topics []sharestate.TopicData[R], result func(R) sharestate.PartitionResult) []sharestate.PartitionResult {
	var out []sharestate.PartitionResult
	for _, td := range topics {
		for _, r := range td.Partitions {
			out = append(out, result(r))
		}
	}
	return out
}
