package persister

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// A SharePartitionState is written several times a second and read by no one who needs to know
// which writer owns which field. Yet the API server tracks that ownership in the object's
// managedFields (about 1.4 KB of JSON), works out at each update who changed what, and keeps the
// entries decoded, nested maps and all, in its watch cache: once in each object and once in each
// recent event. At 10,000 partitions they were half of what a partition cost kube-apiserver's memory,
// and its garbage collector's work with it (docs/performance.md).
//
// An object whose managedFields have been reset stays without them: the API server skips the field
// management of an update (a status update or patch included) when the object has none, and only a
// server-side apply starts it again (k8s.io/apimachinery v0.37.2,
// pkg/util/managedfields/internal/skipnonapplied.go; api/v1alpha1's TestStrippedManagedFieldsStayAway).
// So the persister resets them once, on each object it creates or finds with them.

// ResetManagedFields is the patch that resets an object's managedFields (also the bench's, for objects it
// must shape as the persister does): a list of one empty entry,
// which isResetManagedFields (pkg/util/managedfields/internal/fieldmanager.go, same version) takes for
// a reset however the list is decoded; an empty list is one only while it decodes as a non-nil slice.
var ResetManagedFields = client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"managedFields":[{}]}}`))

// stripManagedFields resets obj's managedFields when it has any, and returns the object as the API
// server then holds it (a newer resourceVersion); or obj itself when there was nothing to do or the
// reset failed, which costs the API server's work, not correctness: the reset touches no state and is
// not conditional on anything. It makes one attempt, not retried: the operation that read obj waits
// on it, and the next read of the object tries again. Once the API server refuses the permission (a
// sidecar role from before the persister needed patch), it stops asking.
func (p *Persister) stripManagedFields(ctx context.Context, c client.Client, obj *sharestatev1.SharePartitionState) *sharestatev1.SharePartitionState {
	if len(obj.ManagedFields) == 0 || p.patchForbidden.Load() {
		return obj
	}
	stripped := obj.DeepCopy()
	reqCtx, cancel := context.WithTimeout(ctx, p.opts.RequestTimeout)
	err := c.Patch(reqCtx, stripped, ResetManagedFields)
	cancel()
	p.apiRequest("patch", err)
	switch {
	case err == nil:
		return stripped
	case apierrors.IsForbidden(err):
		if p.patchForbidden.CompareAndSwap(false, true) {
			p.log.Info("Not patching SharePartitionStates: the role lacks patch on them; every write pays the API server's field "+
				"tracking, and the operator finds their leaders by its periodic resync only",
				"namespace", p.opts.Namespace, "error", err.Error())
		}
	case !apierrors.IsNotFound(err):
		p.log.V(1).Info("Could not reset the managedFields of a SharePartitionState", "name", obj.Name, "error", err.Error())
	}
	return obj
}
