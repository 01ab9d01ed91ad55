package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
)

// fastBackoff tries as often as reviewBackoff, without the waits.
var fastBackoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: reviewBackoff.Steps}

// clock is a settable now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

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

// A verdict is kept: an accepted token for allowedTTL, a refused one for refusedTTL; a review that
// failed is not kept, so the next request asks again.
func TestTokenVerdictsAreKept(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		switch review.Spec.Token {
		case "good":
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "scraper"}}
		case "forbidden":
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "authentication.k8s.io", Resource: "tokenreviews"}, "", errors.New("no RBAC"))
		}
		return true, review, nil
	})
	c := &clock{t: time.Unix(1_000_000, 0)}
	r := newTokenReviewer(cs.AuthenticationV1().TokenReviews(), c.now)
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
	c.t = c.t.Add(refusedTTL)
	_, _, _ = authenticate("good")
	_, _, _ = authenticate("refused")
	if n := reviewsOf(cs, "tokenreviews"); n != 3 {
		t.Fatalf("%d TokenReviews once the refusal expired, want 3 (only the refused token asked again)", n)
	}
	c.t = c.t.Add(allowedTTL)
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
			a := newAccessReviewer(cs.AuthorizationV1().SubjectAccessReviews(), time.Now)
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
	a := newAccessReviewer(cs.AuthorizationV1().SubjectAccessReviews(), time.Now)
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

// The cache stays within maxVerdicts: expired verdicts go first, then arbitrary ones.
func TestVerdictsAreBounded(t *testing.T) {
	c := &clock{t: time.Unix(1_000_000, 0)}
	v := newVerdicts[int](c.now)
	for i := range maxVerdicts {
		v.put(strconv.Itoa(i), i, time.Second)
	}
	c.t = c.t.Add(time.Second)
	v.put("fresh", -1, time.Minute)
	if len(v.entries) != 1 {
		t.Fatalf("%d verdicts after the first put past expiry, want 1 (the expired ones dropped)", len(v.entries))
	}
	for i := range 3 * maxVerdicts {
		v.put(fmt.Sprint("k", i), i, time.Minute)
		if len(v.entries) > maxVerdicts {
			t.Fatalf("%d verdicts, above %d", len(v.entries), maxVerdicts)
		}
	}
	key := fmt.Sprint("k", 3*maxVerdicts-1)
	if got, ok := v.get(key); !ok || got != 3*maxVerdicts-1 {
		t.Fatalf("the newest verdict: %v %v", got, ok)
	}
}
