package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apimachinery/pkg/util/wait"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// maxVerdicts bounds each verdict cache (least recently used out first). Every scraper's token and
// user takes one entry; a caller sending a new random token with each request would otherwise grow
// the cache without bound.
const maxVerdicts = 1024

// reviewBackoff spaces the tries of a review the API server could not answer (a 429 or 5xx, or no
// answer at all): five tries over about four seconds, within the review's timeout.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

// tokenReviewer authenticates a token with a TokenReview, and keeps the verdict (allowedTTL for an
// accepted token, refusedTTL for a refused one) under the token's SHA-256, so the cache holds no
// token. A token the API server refuses is unauthenticated, not an error: an error means the review
// could not be made.
type tokenReviewer struct {
	reviews  authenticationv1client.TokenReviewInterface
	verdicts *cache.LRUExpireCache // token hash → *authenticationv1.UserInfo, nil when refused
	backoff  wait.Backoff
}

func newTokenReviewer(reviews authenticationv1client.TokenReviewInterface, clock cache.Clock) *tokenReviewer {
	return &tokenReviewer{reviews: reviews, verdicts: cache.NewLRUExpireCacheWithClock(maxVerdicts, clock), backoff: reviewBackoff}
}

func (t *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	sum := sha256.Sum256([]byte(token))
	key := hex.EncodeToString(sum[:])
	if user, ok := t.verdicts.Get(key); ok {
		return userOf(user.(*authenticationv1.UserInfo))
	}
	var review *authenticationv1.TokenReview
	err := withRetries(ctx, t.backoff, func(ctx context.Context) (err error) {
		review, err = t.reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return authenticationv1.UserInfo{}, false, fmt.Errorf("creating a TokenReview: %w", err)
	}
	if !review.Status.Authenticated {
		// status.error says why; the scraper is not told (it would only learn why its guess failed).
		t.verdicts.Add(key, (*authenticationv1.UserInfo)(nil), refusedTTL)
		return authenticationv1.UserInfo{}, false, nil
	}
	user := review.Status.User
	t.verdicts.Add(key, &user, allowedTTL)
	return user, true, nil
}

func userOf(user *authenticationv1.UserInfo) (authenticationv1.UserInfo, bool, error) {
	if user == nil {
		return authenticationv1.UserInfo{}, false, nil
	}
	return *user, true, nil
}

// accessReviewer authorizes a user for a verb on a non-resource URL with a SubjectAccessReview, and
// keeps the verdict (allowedTTL when allowed, refusedTTL when not) under the review's request.
type accessReviewer struct {
	reviews  authorizationv1client.SubjectAccessReviewInterface
	verdicts *cache.LRUExpireCache // encoded request → accessVerdict
	backoff  wait.Backoff
}

type accessVerdict struct {
	allowed bool
	reason  string
}

func newAccessReviewer(reviews authorizationv1client.SubjectAccessReviewInterface, clock cache.Clock) *accessReviewer {
	return &accessReviewer{reviews: reviews, verdicts: cache.NewLRUExpireCacheWithClock(maxVerdicts, clock), backoff: reviewBackoff}
}

func (a *accessReviewer) Authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (bool, string, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extraOf(user),
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	// The request, encoded, is the key: every field of it can change the verdict.
	encoded, err := json.Marshal(spec)
	if err != nil {
		return false, "", fmt.Errorf("encoding a SubjectAccessReview: %w", err)
	}
	key := string(encoded)
	if kept, ok := a.verdicts.Get(key); ok {
		v := kept.(accessVerdict)
		return v.allowed, v.reason, nil
	}
	var review *authorizationv1.SubjectAccessReview
	err = withRetries(ctx, a.backoff, func(ctx context.Context) (err error) {
		review, err = a.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return false, "", fmt.Errorf("creating a SubjectAccessReview: %w", err)
	}
	// An authorizer that could not evaluate a rule (status.evaluationError) has not allowed anything:
	// the request is refused, as the API server refuses it.
	v := accessVerdict{allowed: review.Status.Allowed && !review.Status.Denied, reason: review.Status.Reason}
	ttl := refusedTTL
	if v.allowed {
		ttl = allowedTTL
	}
	a.verdicts.Add(key, v, ttl)
	return v.allowed, v.reason, nil
}

func extraOf(user authenticationv1.UserInfo) map[string]authorizationv1.ExtraValue {
	if len(user.Extra) == 0 {
		return nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	return extra
}

// withRetries makes a review within reviewTimeout, trying again, spaced by backoff, after an answer
// that may change (transient), and returns the last try's error.
func withRetries(ctx context.Context, backoff wait.Backoff, review func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		last = review(ctx)
		if last == nil {
			return true, nil
		}
		if !transient(last) {
			return false, last
		}
		return false, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// transient says whether a failed review may succeed if tried again: the API server overloaded or
// failing (429, 5xx), or no answer at all (a refused or dropped connection). A refusal of the
// reviewer itself (401, 403) or of its request (4xx) will not change.
func transient(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= http.StatusInternalServerError
	}
	return true
}
