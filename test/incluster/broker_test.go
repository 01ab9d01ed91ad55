//go:build cluster

package incluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// The stand-in broker: a StatefulSet of one pod whose template is the chart's sidecar example (its
// service account and its sidecar, rendered with the release's values) and whose broker container
// runs the stand-in, which initializes and leads the sample group's partitions 0-3 through the
// sidecar on 127.0.0.1, as a broker's persister would.
const (
	brokerSet        = "broker"
	brokerPod        = brokerSet + "-0"
	sampleGroup      = "orders" // config/samples/sharestate_v1alpha1_sharegroup.yaml
	sampleGroupID    = "orders-processors"
	standInLeads     = 4
	brokerGracePerid = 10
)

// brokerStatefulSet renders the chart's sidecar example with the release's values and makes it the
// stand-in broker's StatefulSet.
func brokerStatefulSet(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	rendered := sh(t, "helm template "+release+" charts/sharestate-operator -n "+releaseNamespace+" -f <(helm get values "+release+" -n "+releaseNamespace+" -o yaml)"+
		" --set sidecar.example.enabled=true --show-only templates/sidecar-example.yaml")
	var tmpl corev1.PodTemplate
	if err := yaml.Unmarshal([]byte(rendered), &tmpl); err != nil {
		t.Fatalf("decoding the chart's sidecar example: %v\n%s", err, rendered)
	}
	spec := tmpl.Template.Spec
	if len(spec.InitContainers) != 1 || spec.ServiceAccountName != brokerAccount {
		t.Fatalf("the chart's sidecar example has init containers %v and service account %q", spec.InitContainers, spec.ServiceAccountName)
	}
	spec.Containers = []corev1.Container{{
		Name:            "broker",
		Image:           standInImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Args:            []string{"--group=" + sampleGroupID, fmt.Sprintf("--partitions=%d", standInLeads), "--interval=500ms"},
		Env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}},
		// The stand-in links test/localcluster, whose envtest import makes a directory in /tmp when
		// it loads: the root filesystem is read-only, as the chart's is.
		VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
		SecurityContext: &corev1.SecurityContext{
			RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		},
	}}
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	spec.TerminationGracePeriodSeconds = ptr.To[int64](brokerGracePerid)
	labels := map[string]string{"app.kubernetes.io/name": brokerSet}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: brokerSet, Namespace: brokerNamespace},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: brokerSet,
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template:    corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// readyPod waits for the pod of the given name to be Ready, and one with another UID than notUID.
func readyPod(t *testing.T, namespace, name string, notUID string, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	eventually(t, timeout, "pod "+name+" to be Ready", func() error {
		if err := cl.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, &pod); err != nil {
			return err
		}
		if string(pod.UID) == notUID {
			return errors.New("still the old pod")
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not Ready:%s", podSummary(namespace))
	})
	return &pod
}

// groupStates lists the sample group's partition states, by partition.
func groupStates(t *testing.T) []sharestatev1.SharePartitionState {
	t.Helper()
	out := groupPartitionStates(t, sampleGroupID)
	slices.SortFunc(out, func(a, b sharestatev1.SharePartitionState) int { return int(a.Spec.Partition - b.Spec.Partition) })
	return out
}

// ledBy returns nil once every partition the stand-in leads is led by pod, not fenced, and written
// to more than writes times.
func ledBy(t *testing.T, pod *corev1.Pod, writes map[int32]int64) error {
	states := groupStates(t)
	led := 0
	for _, s := range states {
		if s.Spec.Partition >= standInLeads {
			continue
		}
		l := s.Status.Leader
		switch {
		case l == nil:
			return fmt.Errorf("partition %d has no leader", s.Spec.Partition)
		case l.PodName != pod.Name || l.PodUID != string(pod.UID) || l.BrokerID != 0:
			return fmt.Errorf("partition %d is led by %s/%s broker %d, want %s/%s broker 0", s.Spec.Partition, l.PodName, l.PodUID, l.BrokerID, pod.Name, pod.UID)
		case apimeta.IsStatusConditionTrue(s.Status.Conditions, sharestatev1.ConditionFenced):
			return fmt.Errorf("partition %d is fenced", s.Spec.Partition)
		case s.Status.WriteCount <= writes[s.Spec.Partition]:
			return fmt.Errorf("partition %d has %d writes, want more than %d", s.Spec.Partition, s.Status.WriteCount, writes[s.Spec.Partition])
		}
		led++
	}
	if led != standInLeads {
		return fmt.Errorf("%d partitions are led, want %d", led, standInLeads)
	}
	return nil
}

// writeCounts is each partition's write count now.
func writeCounts(t *testing.T) map[int32]int64 {
	out := map[int32]int64{}
	for _, s := range groupStates(t) {
		out[s.Spec.Partition] = s.Status.WriteCount
	}
	return out
}

// fencedFrom returns nil once every partition the stand-in led is fenced, its fenced leader the pod
// of oldUID.
func fencedFrom(t *testing.T, oldUID string) error {
	for _, s := range groupStates(t) {
		if s.Spec.Partition >= standInLeads {
			continue
		}
		if f := s.Status.FencedLeader; f == nil || f.PodUID != oldUID {
			return fmt.Errorf("partition %d: fenced leader %+v, want the pod of UID %s", s.Spec.Partition, f, oldUID)
		}
	}
	return nil
}

// containerID is the runtime's id of a pod's container (containerd://<id>), for ctr.
func containerID(pod *corev1.Pod, name string) string {
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if cs.Name == name {
			_, id, _ := strings.Cut(cs.ContainerID, "://")
			return id
		}
	}
	return ""
}

func restarts(pod *corev1.Pod, name string) int32 {
	for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if cs.Name == name {
			return cs.RestartCount
		}
	}
	return -1
}
