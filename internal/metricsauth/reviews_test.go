package metricsauth

import (
	"context"
	"errors"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// fastBackoff tries as often as reviewBackoff, without the waits.
var fastBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: reviewBackoff.Steps}

// reviewsOf counts the reviews of resource (tokenreviews, subjectaccessreviews) cs was asked for.
func reviewsOf(cs *fake.Clientset, resource string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "create" && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// fakeTokenReviews answers every TokenReview with answer's status for its token, or fails it with
// answer's error.
func fakeTokenReviews(answer func(token string) (authenticationv1.TokenReviewStatus, error)) *fake.Clientset {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		status, err := answer(review.Spec.Token)
		if err != nil {
			return true, nil, err
		}
		review.Status = status
		return true, review, nil
	})
	return cs
}

// A verdict is kept: an accepted token for allowedTTL, a refused one for refusedTTL; a review that
// failed is not kept, so the next request asks again.
func TestTokenVerdictsAreKept(t *testing.T) {
	cs := fakeTokenReviews(func(token string) (authenticationv1.TokenReviewStatus, error) {
		switch token {
		case "good":
			return authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "scraper"}}, nil
		case "forbidden":
			return authenticationv1.TokenReviewStatus{}, apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no RBAC"))
		}
		return authenticationv1.TokenReviewStatus{}, nil
	})
	c := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	r := newTokenReviewer(cs.AuthenticationV1().TokenReviews(), c)
	r.backoff = fastBackoff
	ctx := context.Background()
	authenticate := func(token string) (string, bool, error) {
		user, ok, err := r.AuthenticateToken(ctx, token)
		return user.Username, ok, err
	}

	for range 3 {
		if name, ok, err := authenticate("good"); name != "scraper" || !ok || err != nil {
			t.Fatalf("good: %q %v %v", name, ok, err)
		}
		if _, ok, err := authenticate("refused"); ok || err != nil {
			t.Fatalf("refused: %v %v", ok, err)
		}
	}
	if n := reviewsOf(cs, "tokenreviews"); n != 2 {
		t.Fatalf("%d TokenReviews for 3 requests with each of 2 tokens, want 2", n)
	}
	c.Step(refusedTTL + time.Second)
	_, _, _ = authenticate("good")
	_, _, _ = authenticate("refused")
	if n := reviewsOf(cs, "tokenreviews"); n != 3 {
		t.Fatalf("%d TokenReviews once the refusal expired, want 3 (only the refused token asked again)", n)
	}
	c.Step(allowedTTL)
	_, _, _ = authenticate("good")
	if n := reviewsOf(cs, "tokenreviews"); n != 4 {
		t.Fatalf("%d TokenReviews once the acceptance expired, want 4", n)
	}

	// A 403 to the reviewer is not worth trying again (one try per request), and is not kept.
	before := reviewsOf(cs, "tokenreviews")
	for range 2 {
		if _, _, err := authenticate("forbidden"); err == nil {
			t.Fatal("a review the API server forbids: no error")
		}
	}
	if n := reviewsOf(cs, "tokenreviews") - before; n != 2 {
		t.Fatalf("%d tries of a forbidden review in two requests, want 2", n)
	}
}

// A review the API server could not answer (a 5xx, a 429, no connection) is tried again, up to the
// backoff's steps; a review that succeeds on a later try answers the request.
func TestReviewsAreTriedAgain(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"internal error", apierrors.NewInternalError(errors.New("etcd"))},
		{"too many requests", apierrors.NewTooManyRequests("slow down", 1)},
		{"no connection", errors.New("connect: connection refused")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			cs := fake.NewClientset()
			cs.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
				tries++
				if tries < reviewBackoff.Steps {
					return true, nil, tc.err
				}
				review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
				review.Status.Allowed = true
				return true, review, nil
			})
			a := newAccessReviewer(cs.AuthorizationV1().SubjectAccessReviews(), clock.RealClock{})
			a.backoff = fastBackoff
			allowed, _, err := a.Authorize(context.Background(), authenticationv1.UserInfo{Username: "scraper"}, "get", "/metrics")
			if !allowed || err != nil || tries != reviewBackoff.Steps {
				t.Fatalf("allowed %v, %v after %d tries; want allowed after %d", allowed, err, tries, reviewBackoff.Steps)
			}

			tries = -100 // every try fails from now on
			_, _, err = a.Authorize(context.Background(), authenticationv1.UserInfo{Username: "other"}, "get", "/metrics")
			if err == nil || tries != -100+reviewBackoff.Steps {
				t.Fatalf("%v after %d tries; want the last try's error after %d", err, tries+100, reviewBackoff.Steps)
			}
		})
	}
}

// The SubjectAccessReview asks about the user as the TokenReview named it (name, UID, groups, extra)
// and the request's verb and path; the verdict is kept per user and path.
func TestAccessReviewAsksForTheUserAndPath(t *testing.T) {
	var asked []authorizationv1.SubjectAccessReviewSpec
	cs := fake.NewClientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		asked = append(asked, review.Spec)
		switch {
		case review.Spec.User == "scraper" && review.Spec.NonResourceAttributes.Path == "/metrics":
			review.Status.Allowed = true
		case review.Spec.User == "denied":
			review.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: false, Denied: true, Reason: "denied by policy"}
		default:
			review.Status = authorizationv1.SubjectAccessReviewStatus{Reason: "no rule", EvaluationError: "a webhook timed out"}
		}
		return true, review, nil
	})
	a := newAccessReviewer(cs.AuthorizationV1().SubjectAccessReviews(), clock.RealClock{})
	ctx := context.Background()
	scraper := authenticationv1.UserInfo{Username: "scraper", UID: "u-1", Groups: []string{"system:serviceaccounts"},
		Extra: map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prom-0"}}}

	for range 2 {
		if allowed, _, err := a.Authorize(ctx, scraper, "get", "/metrics"); !allowed || err != nil {
			t.Fatalf("scraper on /metrics: %v %v", allowed, err)
		}
	}
	if len(asked) != 1 {
		t.Fatalf("%d reviews for two scrapes, want 1", len(asked))
	}
	want := authorizationv1.SubjectAccessReviewSpec{User: "scraper", UID: "u-1", Groups: []string{"system:serviceaccounts"},
		Extra:                 map[string]authorizationv1.ExtraValue{"authentication.kubernetes.io/pod-name": {"prom-0"}},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}
	if !equality.Semantic.DeepEqual(asked[0], want) {
		t.Fatalf("review asked %+v, want %+v", asked[0], want)
	}
	if allowed, reason, err := a.Authorize(ctx, scraper, "get", "/debug"); allowed || err != nil || reason != "no rule" {
		t.Fatalf("scraper on /debug (no opinion, with an evaluation error): %v %q %v; want refused", allowed, reason, err)
	}
	if allowed, reason, err := a.Authorize(ctx, authenticationv1.UserInfo{Username: "denied"}, "get", "/metrics"); allowed || err != nil || reason != "denied by policy" {
		t.Fatalf("denied: %v %q %v", allowed, reason, err)
	}
	if len(asked) != 3 {
		t.Fatalf("%d reviews, want 3: one per user and path", len(asked))
	}
}
