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
	"k8s.io/apimachinery/pkg/api/equality"
)

const podIndexFieldPath = "metadata.labels['apps.kubernetes.io/pod-index']"

// reviewGroups are the API groups of the sidecar's cluster-scoped rules: the token and access
// reviews of its secure metrics endpoint.
var reviewGroups = []string{"authentication.k8s.io", "authorization.k8s.io"}

// splitSidecarRules splits the generated sidecar rules into those a Role grants in a broker namespace
// and the cluster-scoped review rules.
func splitSidecarRules(t *testing.T) (namespaced, reviews []rbacv1.PolicyRule) {
	t.Helper()
	generated := readRepoYAML[rbacv1.ClusterRole](t, "config/rbac/sidecar/role.yaml")
	for _, r := range generated.Rules {
		if slices.ContainsFunc(r.APIGroups, func(g string) bool { return slices.Contains(reviewGroups, g) }) {
			reviews = append(reviews, r)
		} else {
			namespaced = append(namespaced, r)
		}
	}
	if len(namespaced) == 0 || len(reviews) != 2 {
		t.Fatalf("config/rbac/sidecar/role.yaml has %d namespaced rules and %d review rules, want some and 2", len(namespaced), len(reviews))
	}
	return namespaced, reviews
}

// The generated sidecar rules, all of them: the namespaced ones by a Role and RoleBinding in each
// broker namespace, the review rules (cluster-scoped, which a RoleBinding cannot grant) by a
// ClusterRole bound to the service account of every broker namespace, and only while the sidecar's
// metrics are secure.
func TestSidecarRBAC(t *testing.T) {
	if ms := render(t); len(ms.ofKind("Role"))+len(ms.ofKind("RoleBinding")) != 0 || hasSidecarClusterRBAC(ms) {
		t.Errorf("sidecar RBAC without sidecar.rbac.namespaces: %v", ms)
	}

	ms := render(t, "--set", "sidecar.rbac.namespaces={kafka-a,kafka-b}", "--set", "sidecar.serviceAccountName=kafka-broker")
	wantNamespaced, wantReviews := splitSidecarRules(t)
	roles, bindings := map[string]int{}, map[string]int{}
	for _, m := range ms.ofKind("Role") {
		role := decode[rbacv1.Role](t, m)
		roles[role.Namespace]++
		if !equality.Semantic.DeepEqual(role.Rules, wantNamespaced) {
			t.Errorf("Role %s/%s rules:\n%s\nwant config/rbac/sidecar/role.yaml's namespaced rules:\n%s", role.Namespace, role.Name, toYAML(role.Rules), toYAML(wantNamespaced))
		}
	}
	for _, m := range ms.ofKind("RoleBinding") {
		binding := decode[rbacv1.RoleBinding](t, m)
		bindings[binding.Namespace]++
		wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: fullname + "-sidecar"}
		wantSubjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "kafka-broker", Namespace: binding.Namespace}}
		if binding.RoleRef != wantRef || !slices.Equal(binding.Subjects, wantSubjects) {
			t.Errorf("RoleBinding %s/%s binds %+v to %+v, want %+v to %+v", binding.Namespace, binding.Name, binding.RoleRef, binding.Subjects, wantRef, wantSubjects)
		}
	}
	wantPerNamespace := map[string]int{"kafka-a": 1, "kafka-b": 1}
	if !maps.Equal(roles, wantPerNamespace) || !maps.Equal(bindings, wantPerNamespace) {
		t.Errorf("Roles per namespace %v, RoleBindings %v; want one of each in each listed namespace", roles, bindings)
	}
	for _, m := range ms.ofKind("Role") {
		if m.Metadata.Name != fullname+"-sidecar" {
			t.Errorf("Role %s, want it named %s-sidecar, the name its RoleBinding refers to", m, fullname)
		}
	}

	name := fullname + "-sidecar-auth"
	role := decode[rbacv1.ClusterRole](t, ms.named(t, "ClusterRole", name))
	if !equality.Semantic.DeepEqual(role.Rules, wantReviews) {
		t.Errorf("ClusterRole %s rules:\n%s\nwant config/rbac/sidecar/role.yaml's review rules:\n%s", name, toYAML(role.Rules), toYAML(wantReviews))
	}
	binding := decode[rbacv1.ClusterRoleBinding](t, ms.named(t, "ClusterRoleBinding", name))
	wantRef := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
	wantSubjects := []rbacv1.Subject{
		{Kind: rbacv1.ServiceAccountKind, Name: "kafka-broker", Namespace: "kafka-a"},
		{Kind: rbacv1.ServiceAccountKind, Name: "kafka-broker", Namespace: "kafka-b"},
	}
	if binding.RoleRef != wantRef || !slices.Equal(binding.Subjects, wantSubjects) {
		t.Errorf("ClusterRoleBinding %s binds %+v to %+v, want %+v to %+v", name, binding.RoleRef, binding.Subjects, wantRef, wantSubjects)
	}

	plain := render(t, "--set", "sidecar.rbac.namespaces={kafka-a}", "--set", "sidecar.serviceAccountName=kafka-broker", "--set", "sidecar.metricsSecure=false")
	if hasSidecarClusterRBAC(plain) || len(plain.ofKind("Role")) != 1 {
		t.Errorf("with plain metrics: %v; want the Role only, no review permissions", plain)
	}
}

// hasSidecarClusterRBAC says whether ms hold the sidecar's ClusterRole or ClusterRoleBinding.
func hasSidecarClusterRBAC(ms manifests) bool {
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		for _, m := range ms.ofKind(kind) {
			if m.Metadata.Name == fullname+"-sidecar-auth" {
				return true
			}
		}
	}
	return false
}

// sidecarWant is what the sidecar container must be.
type sidecarWant struct {
	brokerArg               string // the --broker-id argument
	brokerFieldPath         string // the downward-API field of BROKER_ID; empty: no such variable
	image                   string
	listen, health, metrics int32
	plainMetrics            bool // sidecar.metricsSecure=false
}

func defaultSidecar(t *testing.T) sidecarWant {
	return sidecarWant{
		brokerArg: "--broker-id=$(BROKER_ID)", brokerFieldPath: podIndexFieldPath,
		image:  "ghcr.io/sharestate/sharestate-sidecar:" + chartAppVersion(t),
		listen: 9089, health: 9087, metrics: 9088,
	}
}

// assertSidecar checks the sidecar as a broker pod's initContainers entry: a native sidecar, told its
// pod's identity by the downward API, serving on the given ports, probed on its health port.
func assertSidecar(t *testing.T, c corev1.Container, want sidecarWant) {
	t.Helper()
	if c.RestartPolicy == nil || *c.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("restartPolicy = %v, want Always (a native sidecar)", c.RestartPolicy)
	}
	if c.Image != want.image {
		t.Errorf("image = %s, want %s", c.Image, want.image)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			env[e.Name] = e.ValueFrom.ResourceFieldRef.Resource
		default:
			env[e.Name] = "value " + e.Value
		}
	}
	wantEnv := map[string]string{"POD_NAME": "metadata.name", "POD_NAMESPACE": "metadata.namespace", "POD_UID": "metadata.uid",
		"GOMEMLIMIT": "limits.memory"} // the Go runtime's soft limit: the container's
	if want.brokerFieldPath != "" {
		wantEnv["BROKER_ID"] = want.brokerFieldPath
	}
	if !maps.Equal(env, wantEnv) {
		t.Errorf("env = %v, want the downward API's %v", env, wantEnv)
	}
	wantArgs := []string{
		want.brokerArg,
		fmt.Sprintf("--listen-address=127.0.0.1:%d", want.listen),
		fmt.Sprintf("--health-probe-bind-address=:%d", want.health),
		fmt.Sprintf("--metrics-bind-address=:%d", want.metrics), // HTTPS, authenticated and authorized by the API server
	}
	wantMetricsPort := want.metrics
	if want.plainMetrics {
		// Plain HTTP on loopback only, which the sidecar insists on; no container port to reach it by.
		wantArgs[3] = fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", want.metrics)
		wantArgs = append(wantArgs, "--metrics-secure=false")
		wantMetricsPort = 0
	}
	for _, arg := range wantArgs {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %s", c.Args, arg)
		}
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--proxy-") }) || portNumber(c, "sstate-proxy") != 0 {
		t.Errorf("args %q, ports %+v: proxy mode, which is off by default", c.Args, c.Ports)
	}
	if slices.ContainsFunc(c.Args, func(a string) bool { return strings.HasPrefix(a, "--metrics-secure") }) != want.plainMetrics {
		t.Errorf("args %q: --metrics-secure given or not against plainMetrics=%v", c.Args, want.plainMetrics)
	}
	if portNumber(c, "sstate-metrics") != wantMetricsPort {
		t.Errorf("ports = %+v, want sstate-metrics %d", c.Ports, wantMetricsPort)
	}
	assertHTTPProbe(t, "startup", c.StartupProbe, c, "/readyz", want.health)
	assertHTTPProbe(t, "liveness", c.LivenessProbe, c, "/healthz", want.health)
	assertHTTPProbe(t, "readiness", c.ReadinessProbe, c, "/readyz", want.health)
	assertSidecarProbeTiming(t, c)
	assertRestricted(t, nil, c.SecurityContext)
	if len(c.Resources.Requests) == 0 || len(c.Resources.Limits) == 0 {
		t.Errorf("resources = %+v, want requests and limits", c.Resources)
	}
}

// TestSidecarExample checks the named template through templates/sidecar-example.yaml.
func TestSidecarExample(t *testing.T) {
	if pts := render(t).ofKind("PodTemplate"); len(pts) != 0 {
		t.Errorf("the sidecar example by default: %v", pts)
	}
	custom := defaultSidecar(t)
	custom.image = "ghcr.io/sharestate/sharestate-sidecar:v9"
	custom.listen, custom.health, custom.metrics = 9093, 9101, 9102
	pinned := defaultSidecar(t)
	pinned.brokerArg, pinned.brokerFieldPath = "--broker-id=0", ""
	plain := defaultSidecar(t)
	plain.metrics, plain.plainMetrics = 9102, true
	for _, tc := range []struct {
		name   string
		values string
		want   sidecarWant
	}{
		{name: "defaults", want: defaultSidecar(t)},
		{name: "broker id 0", values: "sidecar: {example: {brokerId: 0}}", want: pinned},
		{
			name:   "ports and image",
			values: "sidecar: {listenPort: 9093, healthPort: 9101, metricsPort: 9102, image: {tag: v9}, extraArgs: [--operation-timeout=30s]}",
			want:   custom,
		},
		{name: "plain metrics", values: "sidecar: {metricsPort: 9102, metricsSecure: false}", want: plain},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := render(t, "--set", "sidecar.example.enabled=true", "--set", "sidecar.serviceAccountName=kafka-broker",
				"-f", valuesFile(t, tc.values))
			pt := decode[corev1.PodTemplate](t, ms.only(t, "PodTemplate"))
			spec := pt.Template.Spec
			if len(spec.InitContainers) != 1 || spec.ServiceAccountName != "kafka-broker" {
				t.Fatalf("the example's pod runs as %q with %d init containers, want kafka-broker and 1", spec.ServiceAccountName, len(spec.InitContainers))
			}
			assertSidecar(t, spec.InitContainers[0], tc.want)
			assertSaysItIsAFragment(t, pt)
		})
	}
}

// assertSaysItIsAFragment checks that the example says what it is, a fragment to merge into the
// brokers' pod template, and does not pass for a broker: its broker container is a placeholder of a
// pinned image (it was an untagged apache/kafka, with nothing to say it was not a working example).
func assertSaysItIsAFragment(t *testing.T, pt *corev1.PodTemplate) {
	t.Helper()
	if d := pt.Annotations["sharestate.dev/description"]; !strings.Contains(d, "fragment") || !strings.Contains(d, "placeholder") {
		t.Errorf("the example's description %q does not say it is a fragment with a placeholder broker", d)
	}
	for _, c := range pt.Template.Spec.Containers {
		if _, tag, _ := strings.Cut(c.Image, ":"); tag == "" || tag == "latest" {
			t.Errorf("the example's container %s has image %q, want a pinned tag", c.Name, c.Image)
		}
	}
}

// TestSidecarFromDependentChart includes the named template the way README.md tells a broker chart
// to: from a chart that depends on this one, with this chart's values under its name.
func TestSidecarFromDependentChart(t *testing.T) {
	const subchart = `(index .Subcharts "sharestate-operator")`
	ms := renderChart(t, brokerChart(t, map[string]string{
		"brokers":     brokerStatefulSet("brokers", `(dict "context" `+subchart+`)`),
		"controllers": brokerStatefulSet("controllers", `(dict "context" `+subchart+` "brokerIdFieldPath" "metadata.labels['example.com/node-id']")`),
		"pinned":      brokerStatefulSet("pinned", `(dict "context" `+subchart+` "brokerId" 7)`),
	}))

	want := defaultSidecar(t)
	want.image = "ghcr.io/sharestate/sharestate-sidecar:v9" // the parent's value for this chart
	for name, broker := range map[string]struct{ arg, fieldPath string }{
		"brokers":     {"--broker-id=$(BROKER_ID)", podIndexFieldPath},
		"controllers": {"--broker-id=$(BROKER_ID)", "metadata.labels['example.com/node-id']"},
		"pinned":      {"--broker-id=7", ""},
	} {
		sts := decode[appsv1.StatefulSet](t, ms.named(t, "StatefulSet", name))
		if inits := sts.Spec.Template.Spec.InitContainers; len(inits) != 1 {
			t.Errorf("StatefulSet %s: %d init containers, want the sidecar", name, len(inits))
		} else {
			want.brokerArg, want.brokerFieldPath = broker.arg, broker.fieldPath
			assertSidecar(t, inits[0], want)
		}
	}
	if roles := ms.ofKind("Role"); len(roles) != 1 || roles[0].Metadata.Namespace != "kafka" {
		t.Errorf("sidecar Roles %v, want one in kafka, from the parent's values", roles)
	}

	bad := brokerChart(t, map[string]string{"bad": brokerStatefulSet("bad", `(dict "context" `+subchart+` "brokerId" "one")`)})
	_, errOut, err := helm("template", release, bad, "--namespace", namespace)
	if err == nil || !strings.Contains(errOut, "brokerId must be a non-negative integer") {
		t.Errorf("brokerId \"one\": helm template: %v\n%s\nwant the template to refuse it", err, errOut)
	}
}

// brokerChart writes a broker chart that depends on this one, with the given templates, and returns
// its directory.
func brokerChart(t *testing.T, templates map[string]string) string {
	t.Helper()
	parent := filepath.Join(t.TempDir(), "kafka")
	if err := os.CopyFS(filepath.Join(parent, "charts", "sharestate-operator"), os.DirFS(filepath.Join(repoRoot, chartDir))); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml": `apiVersion: v2
name: kafka
version: 0.1.0
dependencies:
  - name: sharestate-operator
    version: 0.1.0
    repository: file://../sharestate-operator
`,
		"values.yaml": `sharestate-operator:
  crds: {install: false}
  sidecar:
    serviceAccountName: kafka-broker
    rbac: {namespaces: [kafka]}
    image: {tag: v9}
`,
	}
	for name, content := range templates {
		files["templates/"+name+".yaml"] = content
	}
	if err := os.Mkdir(filepath.Join(parent, "templates"), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return parent
}

// brokerStatefulSet is a broker chart's template that includes the sidecar with the given dict.
func brokerStatefulSet(name, dict string) string {
	return strings.NewReplacer("NAME", name, "DICT", dict).Replace(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: NAME
spec:
  serviceName: NAME
  selector:
    matchLabels: {app: NAME}
  template:
    metadata:
      labels: {app: NAME}
    spec:
      serviceAccountName: kafka-broker
      initContainers:
        {{- include "sharestate-operator.sidecarContainer" DICT | nindent 8 }}
      containers:
        - name: kafka
          image: apache/kafka
`)
}

// assertSidecarProbeTiming checks the probes' timing. /readyz is the sidecar's Kafka listeners serving,
// which they do within moments of its start, and nothing it waits for (not the API server): the
// startup probe holds the broker back no more than a second after the sidecar serves, and still
// allows two minutes for a start on a starved node; the readiness probe, which counts toward the
// broker pod's Ready, gives a slow answer a margin and takes more than one failure to turn it NotReady.
func assertSidecarProbeTiming(t *testing.T, c corev1.Container) {
	t.Helper()
	if p := c.StartupProbe; p != nil {
		if p.PeriodSeconds != 1 || p.PeriodSeconds*p.FailureThreshold < 120 {
			t.Errorf("the startup probe checks every %ds, %d times: want every second, for at least 2 minutes", p.PeriodSeconds, p.FailureThreshold)
		}
	}
	if p := c.ReadinessProbe; p != nil {
		// The API's defaults: 1 s timeout, 3 failures (a 0 here is the default).
		if p.TimeoutSeconds < 3 || (p.FailureThreshold != 0 && p.FailureThreshold < 3) {
			t.Errorf("the readiness probe times out after %ds and fails after %d failures: want at least 3s and 3", p.TimeoutSeconds, p.FailureThreshold)
		}
	}
}
