package testenv

import (
	"context"
	"fmt"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kube-apiserver's RBAC authorizer reads Roles, ClusterRoles and their bindings from informers'
// listers (k8s.io/kubernetes v1.37.2, pkg/kubeapiserver/authorizer/config.go), so a new binding is in
// force only once its watch has delivered it, and on a busy machine a test that acts at once is
// refused now and then. A SubjectAccessReview is answered by the same authorizer: once it allows, so
// will the requests.

// accessTimeout bounds the wait for a new role and binding to be in force.
const accessTimeout = 30 * time.Second

// ServiceAccountUser is the user name a service account's requests carry (k8s.io/apiserver v0.37.2,
// pkg/authentication/serviceaccount/util.go, MakeUsername).
func ServiceAccountUser(ns, name string) string { return "system:serviceaccount:" + ns + ":" + name }

// AwaitRule waits until user may do, in ns ("" for every namespace), what the first API group,
// resource (or non-resource URL) and verb of rule name, and fails t if that has not come within
// 30 s: a role holding rule, and its binding to user, are then in force.
func (e *Env) AwaitRule(t testing.TB, user, ns string, rule rbacv1.PolicyRule) {
	t.Helper()
	spec := authorizationv1.SubjectAccessReviewSpec{User: user}
	switch {
	case len(rule.Verbs) == 0:
		t.Fatalf("rule %+v has no verb to wait for", rule)
	case len(rule.NonResourceURLs) > 0:
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: rule.NonResourceURLs[0], Verb: rule.Verbs[0]}
	case len(rule.APIGroups) > 0 && len(rule.Resources) > 0:
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{Namespace: ns, Group: rule.APIGroups[0],
			Resource: rule.Resources[0], Verb: rule.Verbs[0]}
	default:
		t.Fatalf("rule %+v names no resource to wait for", rule)
	}
	cs, err := kubernetes.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	err = Poll(accessTimeout, func() error {
		review := &authorizationv1.SubjectAccessReview{Spec: spec}
		got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		switch {
		case err != nil:
			return err
		case !got.Status.Allowed:
			return fmt.Errorf("%s is not allowed %+v yet (%s)", user, rule, got.Status.Reason)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("waiting for a role to be in force: %v", err)
	}
}
