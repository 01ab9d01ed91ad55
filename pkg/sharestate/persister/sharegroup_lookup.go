package persister

import (
	"cmp"
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// findShareGroup returns the ShareGroup of a Kafka group id in the namespace, or nil when there is none.
// One the persister created itself has the derived name, found with a GET; one a user created may have
// any name, found through the server-side field selector on spec.groupId (a selectable field of the
// CRD). Should two declare the same group id, the older one is the group's.
func findShareGroup(ctx context.Context, c client.Client, namespace, group string, withRetry func(context.Context, string, func(context.Context) error) error) (*sharestatev1.ShareGroup, error) {
	sg := &sharestatev1.ShareGroup{}
	key := client.ObjectKey{Namespace: namespace, Name: sharestatev1.ShareGroupName(group)}
	err := withRetry(ctx, "get", func(ctx context.Context) error { return c.Get(ctx, key, sg) })
	switch classify(err) {
	case classOK:
		if string(sg.Spec.GroupID) == group {
			return sg, nil
		}
	case classNotFound:
	default:
		return nil, err
	}
	var list sharestatev1.ShareGroupList
	err = withRetry(ctx, "list", func(ctx context.Context) error {
		return c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{"spec.groupId": group})
	})
	if err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	oldest := slices.MinFunc(list.Items, func(a, b sharestatev1.ShareGroup) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return &oldest, nil
}
