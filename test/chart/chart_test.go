package chart_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

const keepAnnotation = "helm.sh/resource-policy"

// generatedCRDs decodes config/crd/bases, the CRDs controller-gen generates.
func generatedCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(repoRoot, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		rel, _ := filepath.Rel(repoRoot, p)
		crds = append(crds, readRepoYAML[apiextensionsv1.CustomResourceDefinition](t, rel))
	}
	return crds
}

func TestDefaultObjects(t *testing.T) {
	ms := render(t)
	want := map[string]int{
		"CustomResourceDefinition": len(generatedCRDs(t)),
		"ServiceAccount":           1,
		"ClusterRole":              2, // the operator's and the metrics reader's
		"ClusterRoleBinding":       1,
		"Deployment":               1,
		"Service":                  1,
	}
	if got := ms.kinds(); !maps.Equal(got, want) {
		t.Errorf("objects by kind = %v, want %v", got, want)
	}
	for _, m := range ms {
		namespaced := m.Kind == "ServiceAccount" || m.Kind == "Deployment" || m.Kind == "Service"
		if namespaced && m.Metadata.Namespace != namespace {
			t.Errorf("%v is not in the release's namespace %s", m, namespace)
		}
	}
}

// TestCRDs checks that the chart's CRDs are config/crd/bases' with the keep annotation added.
func TestCRDs(t *testing.T) {
	bases := generatedCRDs(t)
	for _, tc := range []struct {
		name          string
		args          []string
		install, keep bool
	}{
		{name: "defaults", install: true, keep: true},
		{name: "not kept", args: []string{"--set", "crds.keep=false"}, install: true},
		{name: "not installed", args: []string{"--set", "crds.install=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, tc.args...)
			crds := ms.ofKind("CustomResourceDefinition")
			if !tc.install {
				if len(crds) != 0 {
					t.Fatalf("CRDs rendered with crds.install=false: %v", crds)
				}
				return
			}
			if len(crds) != len(bases) {
				t.Errorf("%d CRDs rendered, want the %d of config/crd/bases", len(crds), len(bases))
			}
			for _, base := range bases {
				got := decode[apiextensionsv1.CustomResourceDefinition](t, ms.named(t, "CustomResourceDefinition", base.Name))
				policy, annotated := got.Annotations[keepAnnotation]
				if annotated != tc.keep || (tc.keep && policy != "keep") {
					t.Errorf("CRD %s: annotation %s = %q (set: %v), want it set to keep: %v", base.Name, keepAnnotation, policy, annotated, tc.keep)
				}
				delete(got.Annotations, keepAnnotation)
				if !equality.Semantic.DeepEqual(got, base) {
					t.Errorf("CRD %s differs from config/crd/bases beyond the keep annotation: run hack/sync-chart-crds.sh", base.Name)
				}
			}
		})
	}
}

func TestOperatorRBAC(t *testing.T) {
	ms := render(t)
	want := readRepoYAML[rbacv1.ClusterRole](t, "config/rbac/role.yaml")
	if len(want.Rules) == 0 {
		t.Fatal("config/rbac/role.yaml has no rules")
	}
	role := decode[rbacv1.ClusterRole](t, ms.named(t, "ClusterRole", fullname))
	if !equality.Semantic.DeepEqual(role.Rules, want.Rules) {
		t.Errorf("the operator's ClusterRole rules:\n%s\nwant config/rbac/role.yaml's:\n%s", toYAML(role.Rules), toYAML(want.Rules))
	}
	binding := decode[rbacv1.ClusterRoleBinding](t, ms.named(t, "ClusterRoleBinding", fullname))
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: fullname}
	if binding.RoleRef != wantRef {
		t.Errorf("ClusterRoleBinding roleRef = %+v, want %+v", binding.RoleRef, wantRef)
	}
	wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: fullname, Namespace: namespace}}
	if !slices.Equal(binding.Subjects, wantSubjects) {
		t.Errorf("ClusterRoleBinding subjects = %+v, want %+v", binding.Subjects, wantSubjects)
	}
	ms.named(t, "ServiceAccount", fullname)
	deploy := decode[appsv1.Deployment](t, ms.named(t, "Deployment", fullname))
	if got := deploy.Spec.Template.Spec.ServiceAccountName; got != fullname {
		t.Errorf("the operator runs as %q, want the bound service account %q", got, fullname)
	}

	reader := decode[rbacv1.ClusterRole](t, ms.named(t, "ClusterRole", fullname+"-metrics-reader"))
	wantReader := []rbacv1.PolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/metrics"}}}
	if !equality.Semantic.DeepEqual(reader.Rules, wantReader) {
		t.Errorf("metrics reader rules:\n%s\nwant:\n%s", toYAML(reader.Rules), toYAML(wantReader))
	}
}

func TestOperatorRBACOptions(t *testing.T) {
	t.Run("no rbac", func(t *testing.T) {
		ms := render(t, "--set", "rbac.create=false")
		if n := len(ms.ofKind("ClusterRole")) + len(ms.ofKind("ClusterRoleBinding")); n != 0 {
			t.Errorf("%d ClusterRoles and bindings with rbac.create=false", n)
		}
	})
	t.Run("existing service account", func(t *testing.T) {
		ms := render(t, "--set", "serviceAccount.create=false", "--set", "serviceAccount.name=operator")
		if sas := ms.ofKind("ServiceAccount"); len(sas) != 0 {
			t.Errorf("service accounts created with serviceAccount.create=false: %v", sas)
		}
		deploy := decode[appsv1.Deployment](t, ms.named(t, "Deployment", fullname))
		binding := decode[rbacv1.ClusterRoleBinding](t, ms.named(t, "ClusterRoleBinding", fullname))
		if got := deploy.Spec.Template.Spec.ServiceAccountName; got != "operator" {
			t.Errorf("the operator runs as %q, want operator", got)
		}
		if len(binding.Subjects) != 1 || binding.Subjects[0].Name != "operator" {
			t.Errorf("ClusterRoleBinding subjects = %+v, want the service account operator", binding.Subjects)
		}
	})
}

// assertRestricted checks that a container runs under the "restricted" Pod Security Standard, from
// its own security context or its pod's (nil when unknown, as for a sidecar in someone else's pod).
func assertRestricted(t *testing.T, pod *corev1.PodSecurityContext, c *corev1.SecurityContext) {
	t.Helper()
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	if c == nil {
		t.Fatal("no container security context")
	}
	if nonRoot := cmpOr(c.RunAsNonRoot, pod.RunAsNonRoot); nonRoot == nil || !*nonRoot {
		t.Error("runAsNonRoot is not true")
	}
	if seccomp := cmpOr(c.SeccompProfile, pod.SeccompProfile); seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("seccompProfile = %+v, want RuntimeDefault", seccomp)
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if c.Privileged != nil && *c.Privileged {
		t.Error("privileged")
	}
	if c.Capabilities == nil || !slices.Equal(c.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(c.Capabilities.Add) != 0 {
		t.Errorf("capabilities = %+v, want drop [ALL] and add none", c.Capabilities)
	}
	if c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
}

// cmpOr is the first non-nil pointer: a container's setting, else its pod's.
func cmpOr[T any](ptrs ...*T) *T {
	for _, p := range ptrs {
		if p != nil {
			return p
		}
	}
	return nil
}

// portNumber resolves a probe's or Service's target port against a container's ports.
func portNumber(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

func assertHTTPProbe(t *testing.T, what string, p *corev1.Probe, c corev1.Container, path string, port int32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no HTTP probe", what)
		return
	}
	got := p.HTTPGet.Port.IntVal
	if p.HTTPGet.Port.StrVal != "" {
		got = portNumber(c, p.HTTPGet.Port.StrVal)
	}
	if p.HTTPGet.Path != path || got != port {
		t.Errorf("%s probes %s on port %v (%d), want %s on %d", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), got, path, port)
	}
}

func chartAppVersion(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, chartDir, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var chart struct {
		APIVersion string `json:"apiVersion"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(data, &chart); err != nil {
		t.Fatal(err)
	}
	if chart.APIVersion != "v2" || chart.Version != "0.1.0" || chart.AppVersion == "" {
		t.Fatalf("Chart.yaml: apiVersion %q, version %q, appVersion %q; want v2, 0.1.0 and an appVersion",
			chart.APIVersion, chart.Version, chart.AppVersion)
	}
	return chart.AppVersion
}

func operatorDeployment(t *testing.T, ms manifests) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	deploy := decode[appsv1.Deployment](t, ms.named(t, "Deployment", fullname))
	pod := deploy.Spec.Template
	selector, err := metav1.LabelSelectorAsSelector(deploy.Spec.Selector)
	if err != nil || !selector.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the Deployment's selector %v does not select its pods' labels %v (%v)", deploy.Spec.Selector, pod.Labels, err)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers in the operator's pod, want 1", len(pod.Spec.Containers))
	}
	return deploy, pod.Spec.Containers[0]
}

func TestDeploymentDefaults(t *testing.T) {
	deploy, c := operatorDeployment(t, render(t))
	if deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1", deploy.Spec.Replicas)
	}
	if want := "ghcr.io/sharestate/sharestate-operator:" + chartAppVersion(t); c.Image != want {
		t.Errorf("image = %s, want %s", c.Image, want)
	}
	wantArgs := []string{
		"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081",
		"--max-concurrent-reconciles=16", "--zap-log-level=info", "--zap-encoder=json",
	}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args = %q, want %q", c.Args, wantArgs)
	}
	assertHTTPProbe(t, "liveness", c.LivenessProbe, c, "/healthz", 8081)
	assertHTTPProbe(t, "readiness", c.ReadinessProbe, c, "/readyz", 8081)
	if len(c.Env) != 1 || c.Env[0].Name != "GOMEMLIMIT" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.ResourceFieldRef == nil ||
		c.Env[0].ValueFrom.ResourceFieldRef.Resource != "limits.memory" {
		t.Errorf("env = %+v, want GOMEMLIMIT from limits.memory (the Go runtime's soft limit: the container's)", c.Env)
	}
	assertRestricted(t, deploy.Spec.Template.Spec.SecurityContext, c.SecurityContext)
	for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := list[name]; !ok || q.IsZero() {
				t.Errorf("no %s in requests and limits %+v", name, c.Resources)
			}
		}
	}
}

func TestDeploymentValues(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	ms := render(t, "-f", valuesFile(t, fmt.Sprintf(`
replicas: 3
image: {digest: %q}
imagePullSecrets: [{name: registry}]
watchNamespaces: [kafka-a, kafka-b]
fenceNotReadyAfter: 2m
maxConcurrentReconciles: 4
logging: {level: 4, format: console}
extraArgs: [--group-totals-refresh=1m]
podLabels: {team: streaming}
priorityClassName: system-cluster-critical
resources: {requests: {cpu: 10m}, limits: {memory: 256Mi}}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: sharestate, effect: NoSchedule}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [system]}]}]
`, digest)))
	deploy, c := operatorDeployment(t, ms)
	pod := deploy.Spec.Template.Spec
	if deploy.Spec.Replicas == nil || *deploy.Spec.Replicas != 3 {
		t.Errorf("replicas = %v, want 3", deploy.Spec.Replicas)
	}
	if want := "ghcr.io/sharestate/sharestate-operator@" + digest; c.Image != want {
		t.Errorf("image = %s, want %s", c.Image, want)
	}
	wantArgs := []string{
		"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081",
		"--watch-namespace=kafka-a", "--watch-namespace=kafka-b", "--fence-not-ready-after=2m",
		"--max-concurrent-reconciles=4", "--zap-log-level=4", "--zap-encoder=console", "--group-totals-refresh=1m",
	}
	if !slices.Equal(c.Args, wantArgs) {
		t.Errorf("args = %q, want %q", c.Args, wantArgs)
	}
	if got := deploy.Spec.Template.Labels["team"]; got != "streaming" {
		t.Errorf("pod label team = %q, want streaming", got)
	}
	if !slices.Equal(pod.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "registry"}}) || pod.PriorityClassName != "system-cluster-critical" {
		t.Errorf("imagePullSecrets %v, priorityClassName %q", pod.ImagePullSecrets, pod.PriorityClassName)
	}
	// The values merge into the defaults: the memory request and CPU limit stay.
	wantResources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	if !equality.Semantic.DeepEqual(c.Resources, wantResources) {
		t.Errorf("resources:\n%s\nwant:\n%s", toYAML(c.Resources), toYAML(wantResources))
	}
	if !maps.Equal(pod.NodeSelector, map[string]string{"kubernetes.io/os": "linux"}) {
		t.Errorf("nodeSelector = %v", pod.NodeSelector)
	}
	wantTolerations := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "sharestate", Effect: corev1.TaintEffectNoSchedule}}
	if !equality.Semantic.DeepEqual(pod.Tolerations, wantTolerations) {
		t.Errorf("tolerations = %+v, want %+v", pod.Tolerations, wantTolerations)
	}
	if a := pod.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil ||
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchExpressions[0].Key != "pool" {
		t.Errorf("affinity = %s, want the node affinity to pool", toYAML(pod.Affinity))
	}
}

func TestMetricsService(t *testing.T) {
	ms := render(t)
	deploy, c := operatorDeployment(t, ms)
	svc := decode[corev1.Service](t, ms.named(t, "Service", fullname+"-metrics"))
	if len(svc.Spec.Ports) != 1 {
		t.Fatalf("metrics Service ports = %+v, want one", svc.Spec.Ports)
	}
	port := svc.Spec.Ports[0]
	if port.Name != "https" || port.Port != 8443 || portNumber(c, port.TargetPort.StrVal) != 8443 {
		t.Errorf("metrics Service port %+v, want https 8443 to the container's 8443", port)
	}
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(deploy.Spec.Template.Labels)) {
		t.Errorf("the Service's selector %v does not select the operator's pods %v", svc.Spec.Selector, deploy.Spec.Template.Labels)
	}
}

func TestMetricsDisabled(t *testing.T) {
	ms := render(t, "--set", "metrics.enabled=false", "--set", "metrics.serviceMonitor.enabled=true")
	_, c := operatorDeployment(t, ms)
	if !slices.Contains(c.Args, "--metrics-bind-address=0") || portNumber(c, "https") != 0 {
		t.Errorf("with metrics.enabled=false: args %q, ports %+v; want metrics off and no https port", c.Args, c.Ports)
	}
	for _, kind := range []string{"Service", "ServiceMonitor"} {
		if of := ms.ofKind(kind); len(of) != 0 {
			t.Errorf("with metrics.enabled=false: %v", of)
		}
	}
	if n := len(ms.ofKind("ClusterRole")); n != 1 {
		t.Errorf("%d ClusterRoles, want only the operator's", n)
	}
}

// serviceMonitor is the part of monitoring.coreos.com/v1 ServiceMonitor that the chart renders.
type serviceMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		JobLabel          string `json:"jobLabel"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port            string          `json:"port"`
			Scheme          string          `json:"scheme"`
			Path            string          `json:"path"`
			Interval        string          `json:"interval"`
			ScrapeTimeout   string          `json:"scrapeTimeout"`
			BearerTokenFile string          `json:"bearerTokenFile"`
			TLSConfig       map[string]bool `json:"tlsConfig"`
		} `json:"endpoints"`
	} `json:"spec"`
}

func TestServiceMonitor(t *testing.T) {
	if sms := render(t).ofKind("ServiceMonitor"); len(sms) != 0 {
		t.Errorf("a ServiceMonitor by default: %v", sms)
	}
	for _, tc := range []struct {
		name, wantNamespace string
		args                []string
	}{
		{name: "release namespace", wantNamespace: namespace},
		{name: "own namespace", wantNamespace: "monitoring", args: []string{"--set", "metrics.serviceMonitor.namespace=monitoring"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, append([]string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.labels.release=prom"}, tc.args...)...)
			m := ms.only(t, "ServiceMonitor")
			sm := decode[serviceMonitor](t, m)
			svc := decode[corev1.Service](t, ms.named(t, "Service", fullname+"-metrics"))
			if sm.APIVersion != "monitoring.coreos.com/v1" || sm.Namespace != tc.wantNamespace || sm.Labels["release"] != "prom" {
				t.Errorf("ServiceMonitor %s in %q with labels %v; want monitoring.coreos.com/v1 in %q labelled release=prom",
					sm.APIVersion, sm.Namespace, sm.Labels, tc.wantNamespace)
			}
			selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
			if err != nil || !selector.Matches(labels.Set(svc.Labels)) || !slices.Equal(sm.Spec.NamespaceSelector.MatchNames, []string{namespace}) {
				t.Errorf("the ServiceMonitor selects %v in %v, not the metrics Service %v in %s (%v)",
					sm.Spec.Selector, sm.Spec.NamespaceSelector.MatchNames, svc.Labels, namespace, err)
			}
			if len(sm.Spec.Endpoints) != 1 {
				t.Fatalf("ServiceMonitor endpoints = %+v, want one", sm.Spec.Endpoints)
			}
			ep := sm.Spec.Endpoints[0]
			if ep.Port != svc.Spec.Ports[0].Name || ep.Scheme != "https" || ep.Path != "/metrics" || ep.BearerTokenFile == "" {
				t.Errorf("ServiceMonitor endpoint %+v, want the Service's port %s over https with a bearer token", ep, svc.Spec.Ports[0].Name)
			}
		})
	}
}
