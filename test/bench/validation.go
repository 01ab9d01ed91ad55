package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// ValidationCostScenario names the scenario that measures what the SharePartitionState schema's
// validation rules (CEL) cost kube-apiserver per status update. It runs with every scenario (no
// -scenarios) or when named.
const ValidationCostScenario = "validation-cost"

// The scenario's writes: one partition, written as rawUpdates writes it, warmed up to its steady state
// (about 60 batches), then measured. kube-apiserver's allocation per write is its own figure, the same
// from run to run within a few tenths of a percent; its CPU per write is the machine's.
const (
	validationWarmupWrites = 300
	validationWrites       = 1000
)

// baselineGroup is the API group of the baseline: the SharePartitionState CRD as generated, every
// x-kubernetes-validations rule taken out, under another name. Everything else (the schema's types,
// patterns, defaults, the status subresource) is the same, so what the two cost apart is the rules.
const baselineGroup = "baseline.bench.sharestate.dev"

// validationCost is the scenario's result: kube-apiserver's allocation (KB) and CPU (ms) per status
// update, with the rules and without them.
type validationCost struct {
	writes                   int
	allocKB, baselineAllocKB float64
	cpuMS, baselineCPUMS     float64
}

// Line is the scenario's line of output.
func (v validationCost) Line() string {
	return fmt.Sprintf("scenario=%s writes=%d apiserver_alloc_kb_per_write=%.1f baseline_alloc_kb_per_write=%.1f rules_alloc_share=%.3f apiserver_cpu_ms_per_write=%.3f baseline_cpu_ms_per_write=%.3f",
		ValidationCostScenario, v.writes, v.allocKB, v.baselineAllocKB, v.rulesAllocShare(), v.cpuMS, v.baselineCPUMS)
}

// rulesAllocShare is the part of kube-apiserver's allocation per write that the rules make.
func (v validationCost) rulesAllocShare() float64 {
	if v.allocKB <= 0 {
		return math.NaN()
	}
	return (v.allocKB - v.baselineAllocKB) / v.allocKB
}

// runValidationCost measures the scenario on env and prints its line to out.
func runValidationCost(ctx context.Context, env *testenv.Env, out, log io.Writer) error {
	fmt.Fprintf(log, "bench: %s: %d status updates of one partition with the schema's rules and %d without them\n",
		ValidationCostScenario, validationWrites, validationWrites)
	res, err := measureValidationCost(ctx, env, validationWarmupWrites, validationWrites)
	if err != nil {
		return fmt.Errorf("%s: %w", ValidationCostScenario, err)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, res.Line())
	return nil
}

// measureValidationCost writes one partition of each kind warmup times, then writes times, in two
// halves taken in turn (ours, the baseline, ours, the baseline) so that a slow spell of the machine
// spreads over both.
func measureValidationCost(ctx context.Context, env *testenv.Env, warmup, writes int) (validationCost, error) {
	ours, baseline, err := validationWriters(ctx, env)
	if err != nil {
		return validationCost{}, err
	}
	for _, write := range []writeFunc{ours, baseline} {
		if err := writeTimes(ctx, write, warmup); err != nil {
			return validationCost{}, err
		}
	}
	var oursCost, baselineCost apiserverCost
	for _, half := range []int{writes / 2, writes - writes/2} {
		for _, w := range []struct {
			write writeFunc
			cost  *apiserverCost
		}{{ours, &oursCost}, {baseline, &baselineCost}} {
			c, err := measureAPIServer(ctx, env.Config, func() error { return writeTimes(ctx, w.write, half) })
			if err != nil {
				return validationCost{}, err
			}
			w.cost.add(c)
		}
	}
	n := float64(writes)
	return validationCost{
		writes:  writes,
		allocKB: oursCost.allocBytes / n / 1024, baselineAllocKB: baselineCost.allocBytes / n / 1024,
		cpuMS: oursCost.cpuSeconds / n * 1000, baselineCPUMS: baselineCost.cpuSeconds / n * 1000,
	}, nil
}

func writeTimes(ctx context.Context, write writeFunc, n int) error {
	for range n {
		if err := write(ctx); err != nil {
			return err
		}
	}
	return nil
}

// apiserverCost is what kube-apiserver's process spent: bytes allocated on its Go heap, CPU seconds.
type apiserverCost struct {
	allocBytes, cpuSeconds float64
}

func (c *apiserverCost) add(o apiserverCost) {
	c.allocBytes += o.allocBytes
	c.cpuSeconds += o.cpuSeconds
}

// measureAPIServer runs work and returns what kube-apiserver spent meanwhile, from its metrics.
func measureAPIServer(ctx context.Context, config *rest.Config, work func() error) (apiserverCost, error) {
	before, err := sampleAPIServerCost(ctx, config)
	if err != nil {
		return apiserverCost{}, err
	}
	if err := work(); err != nil {
		return apiserverCost{}, err
	}
	after, err := sampleAPIServerCost(ctx, config)
	if err != nil {
		return apiserverCost{}, err
	}
	return apiserverCost{allocBytes: after.allocBytes - before.allocBytes, cpuSeconds: after.cpuSeconds - before.cpuSeconds}, nil
}

func sampleAPIServerCost(ctx context.Context, config *rest.Config) (apiserverCost, error) {
	samples, err := apiserverMetrics(ctx, config)
	if err != nil {
		return apiserverCost{}, err
	}
	c := apiserverCost{
		allocBytes: samples.sum("go_memstats_alloc_bytes_total", ""),
		cpuSeconds: samples.sum("process_cpu_seconds_total", ""),
	}
	if math.IsNaN(c.allocBytes) || math.IsNaN(c.cpuSeconds) {
		return apiserverCost{}, fmt.Errorf("kube-apiserver's metrics have no go_memstats_alloc_bytes_total or process_cpu_seconds_total")
	}
	return c, nil
}

// validationWriters sets up one partition as rawUpdates does, and its copy in the baseline's kind
// (same labels, owner reference and status, managedFields reset as the persister resets them), and
// returns a writer of each.
func validationWriters(ctx context.Context, env *testenv.Env) (ours, baseline writeFunc, err error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-" + ValidationCostScenario + "-"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		return nil, nil, fmt.Errorf("creating a namespace: %w", err)
	}
	writers, err := rawUpdates(1)(ctx, env.Client, ns.Name)
	if err != nil {
		return nil, nil, err
	}
	var original v1alpha1.SharePartitionState
	key := client.ObjectKey{Namespace: ns.Name, Name: v1alpha1.SharePartitionStateName(groupID, topicIDText, 0)}
	if err := env.Client.Get(ctx, key, &original); err != nil {
		return nil, nil, err
	}
	c, err := baselineClient(ctx, env)
	if err != nil {
		return nil, nil, err
	}
	copied, err := createBaselineCopy(ctx, c, &original)
	if err != nil {
		return nil, nil, err
	}
	cursor := &offsetCursor{}
	baseline = func(ctx context.Context) error {
		if err := applyWrite(&copied.Status, cursor.next(), metav1.Now()); err != nil {
			return err
		}
		return c.Status().Update(ctx, copied)
	}
	return writers[0], baseline, nil
}

// createBaselineCopy creates original's copy in the baseline's kind and gives it original's status.
func createBaselineCopy(ctx context.Context, c client.Client, original *v1alpha1.SharePartitionState) (*v1alpha1.SharePartitionState, error) {
	copied := &v1alpha1.SharePartitionState{ObjectMeta: metav1.ObjectMeta{
		Namespace: original.Namespace, Name: original.Name,
		Labels: original.Labels, Annotations: original.Annotations, OwnerReferences: original.OwnerReferences,
	}, Spec: original.Spec}
	if err := c.Create(ctx, copied); err != nil {
		return nil, fmt.Errorf("creating the baseline's partition: %w", err)
	}
	if err := c.Patch(ctx, copied, persister.ResetManagedFields); err != nil {
		return nil, fmt.Errorf("resetting the baseline partition's managedFields: %w", err)
	}
	copied.Status = *original.Status.DeepCopy()
	if err := c.Status().Update(ctx, copied); err != nil {
		return nil, fmt.Errorf("writing the baseline partition's status: %w", err)
	}
	return copied, nil
}

// baselineClient installs the baseline's CRD (once per control plane) and returns a client that
// writes SharePartitionStates as objects of that kind.
func baselineClient(ctx context.Context, env *testenv.Env) (client.Client, error) {
	crd, err := baselineCRD()
	if err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}}); err != nil {
		return nil, fmt.Errorf("installing the baseline's CRD: %w", err)
	}
	gv := schema.GroupVersion{Group: baselineGroup, Version: v1alpha1.GroupVersion.Version}
	scheme := k8sruntime.NewScheme()
	scheme.AddKnownTypes(gv, &v1alpha1.SharePartitionState{}, &v1alpha1.SharePartitionStateList{})
	metav1.AddToGroupVersion(scheme, gv)
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, -1
	cfg.Timeout = requestTimeout
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	// The REST mapper may have looked the group up before the CRD was served.
	return c, testenv.Poll(30*time.Second, func() error {
		return c.List(ctx, &v1alpha1.SharePartitionStateList{}, client.Limit(1))
	})
}

// baselineCRD is config/crd/bases' SharePartitionState CRD in baselineGroup, without its rules.
func baselineCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	path := filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", v1alpha1.GroupVersion.Group+"_sharepartitionstates.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	crd.Spec.Group = baselineGroup
	crd.Name = crd.Spec.Names.Plural + "." + baselineGroup
	for i := range crd.Spec.Versions {
		if v := crd.Spec.Versions[i].Schema; v != nil && v.OpenAPIV3Schema != nil {
			dropRules(v.OpenAPIV3Schema)
		}
	}
	return crd, nil
}

// dropRules takes every x-kubernetes-validations rule out of s and the schemas under it.
func dropRules(s *apiextensionsv1.JSONSchemaProps) {
	s.XValidations = nil
	for name, p := range s.Properties {
		dropRules(&p)
		s.Properties[name] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		dropRules(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		dropRules(s.AdditionalProperties.Schema)
	}
}
