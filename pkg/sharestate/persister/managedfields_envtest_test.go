package persister_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/internal/prommetrics"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The persister's objects carry no managedFields, from their creation on through every write: the API
// server then skips its field tracking on each of them (managedfields.go).
func TestPersisterObjectsCarryNoManagedFields(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 100), sharestate.ErrNone)
	if r := read(t, p, "g", 0, 1); r.ErrorCode != sharestate.ErrNone {
		t.Fatalf("read: %s", r.ErrorCode)
	}
	expectCode(t, "write", write(t, p, "g", sharestate.WritePartition{Partition: 0, StateEpoch: 1, LeaderEpoch: 1, StartOffset: 100,
		StateBatches: []sharestate.StateBatch{batch(100, 109, sharestate.DeliveryStateAcknowledged, 1)}}), sharestate.ErrNone)
	if obj := getObject(t, ns, "g", 0); len(obj.ManagedFields) != 0 {
		t.Fatalf("the persister's object has managedFields %+v", obj.ManagedFields)
	}
}

// An object that has managedFields (created before the persister reset them, or applied server-side
// since) loses them at the persister's first read of it, and keeps its state.
func TestPersisterStripsTheManagedFieldsItFinds(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	p := newPersister(t, ns, 1)
	expectCode(t, "initialize", initialize(t, p, "g", 0, 1, 100), sharestate.ErrNone)
	obj := getObject(t, ns, "g", 0)
	obj.Labels["tracked"] = "again"
	obj.ManagedFields = nil
	if err := env.Client.Update(ctx, obj, client.FieldOwner("admin")); err != nil {
		t.Fatal(err)
	}
	// An update does not track an object without managedFields: a server-side apply does.
	apply := client.RawPatch("application/apply-patch+yaml", []byte(`{"apiVersion":"sharestate.dev/v1alpha1","kind":"SharePartitionState","metadata":{"labels":{"applied":"yes"}}}`))
	if err := env.Client.Patch(ctx, obj, apply, client.FieldOwner("admin"), client.ForceOwnership); err != nil {
		t.Fatal(err)
	}
	if len(getObject(t, ns, "g", 0).ManagedFields) == 0 {
		t.Fatal("a server-side apply left no managedFields: nothing to strip")
	}

	other := newPersister(t, ns, 2) // a new leader: nothing cached, so it reads the object
	if r := read(t, other, "g", 0, 2); r.ErrorCode != sharestate.ErrNone || r.StateEpoch != 1 || r.StartOffset != 100 {
		t.Fatalf("read: %+v", r)
	}
	got := getObject(t, ns, "g", 0)
	if len(got.ManagedFields) != 0 {
		t.Fatalf("after the read the object has managedFields %+v", got.ManagedFields)
	}
	if got.Labels["applied"] != "yes" || got.Status.Leader == nil || got.Status.Leader.BrokerID != 2 {
		t.Fatalf("the reset changed more than managedFields: labels %v, leader %+v", got.Labels, got.Status.Leader)
	}
}

// A sidecar role from before the persister needed patch: the persister works as before, asks once,
// and stops asking.
func TestPersisterWithoutPatchKeepsManagedFieldsAndStopsAsking(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-sidecar"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{sharestatev1.GroupVersion.Group}, Resources: []string{"sharegroups"}, Verbs: []string{"get", "list", "create"}},
			{APIGroups: []string{sharestatev1.GroupVersion.Group}, Resources: []string{"sharepartitionstates"}, Verbs: []string{"get", "create", "delete"}},
			{APIGroups: []string{sharestatev1.GroupVersion.Group}, Resources: []string{"sharepartitionstates/status"}, Verbs: []string{"get", "update"}},
		},
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-sidecar"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "old-sidecar"}},
	}
	for _, o := range []client.Object{role, binding} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	env.AwaitRule(t, "old-sidecar", ns, role.Rules[0])
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "old-sidecar"}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	observer, err := prommetrics.NewPersisterObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := persister.New(persister.Options{Client: c, Namespace: ns, Observer: observer, OperationTimeout: 10 * time.Second,
		Identity: persister.Identity{BrokerID: 1, PodName: podName(1), PodUID: "uid-" + podName(1)}})
	if err != nil {
		t.Fatal(err)
	}
	for partition := range int32(3) {
		expectCode(t, "initialize", initialize(t, p, "g", partition, 1, 100), sharestate.ErrNone)
		if r := read(t, p, "g", partition, 1); r.ErrorCode != sharestate.ErrNone {
			t.Fatalf("read: %s", r.ErrorCode)
		}
	}
	if obj := getObject(t, ns, "g", 0); len(obj.ManagedFields) == 0 {
		t.Fatal("the object lost its managedFields without patch permission")
	}
	if n := testenv.CounterSum(t, reg, "sharestate_persister_api_requests_total", "verb", "patch"); n != 1 {
		t.Fatalf("%v patch requests, want 1: the persister should stop asking once refused", n)
	}
}
