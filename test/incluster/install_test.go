//go:build cluster

package incluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// imageOverrides are the only values the test adds to the README's install command: the images
// built here.
var imageOverrides = []string{
	"--set", "image.repository=" + operatorImage, "--set", "image.tag=" + imageTag,
	"--set", "sidecar.image.repository=" + sidecarImage, "--set", "sidecar.image.tag=" + imageTag,
}

// readmeInstall is the README's helm-install block with imageOverrides added to its helm install.
func readmeInstall(t *testing.T) string {
	t.Helper()
	block, err := testenv.DocBlock(filepath.Join(testenv.RepoRoot(), "README.md"), "helm-install")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(block, "\n")
	for i, line := range lines {
		if !strings.HasPrefix(strings.TrimSpace(line), "helm install ") {
			continue
		}
		end := i
		for end+1 < len(lines) && strings.HasSuffix(strings.TrimSpace(lines[end]), `\`) {
			end++
		}
		lines[end] += " " + strings.Join(imageOverrides, " ")
		return strings.Join(lines, "\n")
	}
	t.Fatalf("the README's helm-install block has no helm install:\n%s", block)
	return ""
}

// waitForDeployment waits until the operator's Deployment has rolled out replicas available pods.
func waitForDeployment(t *testing.T, replicas int32, timeout time.Duration) *appsv1.Deployment {
	t.Helper()
	var d appsv1.Deployment
	eventually(t, timeout, "the operator's Deployment to become Available", func() error {
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: releaseNamespace, Name: operatorName}, &d); err != nil {
			return err
		}
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != replicas || s.AvailableReplicas != replicas || s.Replicas != replicas {
			return fmt.Errorf("status %+v, want %d replicas updated and available; pods: %s", s, replicas, podSummary(releaseNamespace))
		}
		return nil
	})
	return &d
}

// operatorPods lists the operator's running pods.
func operatorPods(t *testing.T) []corev1.Pod {
	t.Helper()
	var pods corev1.PodList
	if err := cl.List(context.Background(), &pods, client.InNamespace(releaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "operator"}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p)
		}
	}
	return out
}

// podSummary says, for a failing wait, what each pod of the namespace is doing.
func podSummary(namespace string) string {
	var pods corev1.PodList
	if err := cl.List(context.Background(), &pods, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\n  %s %s", p.Name, p.Status.Phase)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, " [%s ready=%t restarts=%d", cs.Name, cs.Ready, cs.RestartCount)
			if w := cs.State.Waiting; w != nil {
				fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
			}
			if term := cs.State.Terminated; term != nil {
				fmt.Fprintf(&b, " terminated %s (%d)", term.Reason, term.ExitCode)
			}
			b.WriteString("]")
		}
	}
	return b.String()
}

// checkNoForbidden fails t when an operator pod's log or an event of the cluster says "forbidden":
// the operator runs under the chart's service account, so a verb the chart's RBAC lacks shows there.
func checkNoForbidden(t *testing.T) {
	t.Helper()
	for _, p := range operatorPods(t) {
		logs := sh(t, "kubectl logs -n "+releaseNamespace+" "+p.Name+" 2>&1 | grep -i forbidden || true")
		if strings.TrimSpace(logs) != "" {
			t.Errorf("the operator pod %s was refused by the API server:\n%s", p.Name, logs)
		}
	}
	events := sh(t, "kubectl get events -A -o custom-columns=NS:.metadata.namespace,REASON:.reason,MESSAGE:.message --no-headers | grep -i forbidden || true")
	if strings.TrimSpace(events) != "" {
		t.Errorf("events say forbidden:\n%s", events)
	}
}
