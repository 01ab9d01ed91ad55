package metricsauth

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long a review may take, and how long its verdict is kept. A scraper comes back every 15 to 60
// seconds with the same token: a verdict kept a minute costs the API server a TokenReview and a
// SubjectAccessReview a minute per scraper. A refusal is kept less, so a fix of the scraper's RBAC
// shows soon; a review that failed is not kept at all.
const (
	reviewTimeout = 10 * time.Second
	allowedTTL    = time.Minute
	refusedTTL    = 10 * time.Second
)

// FilterProvider is a metricsserver.Options.FilterProvider that authenticates and authorizes every
// request through the API server of cfg. The identity of cfg needs to create tokenreviews
// (authentication.k8s.io) and subjectaccessreviews (authorization.k8s.io); a scraper needs the verb
// get on the non-resource URL it scrapes (/metrics).
//
// It answers as the API server itself does: 401 to a request without a bearer token or with one the
// API server does not accept, 403 to a user not allowed the path, and 500 only when a review could not
// be made (the API server unreachable, or the reviewer lacking its own permissions). controller-runtime's
// filters.WithAuthenticationAndAuthorization answers 500 to any token the API server refuses: its
// token authenticator turns a refusal into an error, and it answers every error 500.
func FilterProvider(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationv1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the TokenReview client: %w", err)
	}
	authz, err := authorizationv1client.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the SubjectAccessReview client: %w", err)
	}
	access, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authz,
		AllowCacheTTL:             allowedTTL,
		DenyCacheTTL:              refusedTTL,
		// Retries of a review the API server could not answer (5xx, 429, a dropped connection), as
		// Kubernetes' own delegated authorization does them.
		WebhookRetryBackoff: &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5},
	}.New()
	if err != nil {
		return nil, fmt.Errorf("creating the authorizer: %w", err)
	}
	tokens := tokencache.New(&tokenReviewer{reviews: authn.TokenReviews()}, false, allowedTTL, refusedTTL)
	return Filter(tokens, access), nil
}

// Filter returns a metrics filter that authenticates a request's bearer token with tokens and
// authorizes its user for the request's method (lower-cased: get) on its path with access.
func Filter(tokens authenticator.Token, access authorizer.UnconditionalAuthorizer) metricsserver.Filter {
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok := bearerToken(r)
			if !ok {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			resp, ok, err := tokens.AuthenticateToken(r.Context(), token)
			switch {
			case err != nil:
				log.Error(err, "Reviewing a scraper's token failed")
				http.Error(w, "Authentication failed", http.StatusInternalServerError)
				return
			case !ok:
				log.V(4).Info("Refused a scrape whose token the API server does not accept")
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			attrs := authorizer.AttributesRecord{User: resp.User, Verb: strings.ToLower(r.Method), Path: r.URL.Path}
			decision, reason, err := access.Authorize(r.Context(), attrs)
			switch {
			case err != nil:
				log.Error(err, "Reviewing a scraper's access failed", "user", resp.User.GetName())
				http.Error(w, "Authorization failed", http.StatusInternalServerError)
				return
			case decision != authorizer.DecisionAllow:
				log.V(4).Info("Refused a scrape by a user without access", "user", resp.User.GetName(), "reason", reason)
				http.Error(w, "Forbidden", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}
}

// bearerToken returns the token of an "Authorization: Bearer <token>" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

// tokenReviewer authenticates a token with a TokenReview. Unlike the API server's webhook token
// authenticator, it reports a token the API server refuses as unauthenticated, not as an error: an
// error here means the review could not be made.
type tokenReviewer struct {
	reviews authenticationv1client.TokenReviewInterface
}

func (t *tokenReviewer) AuthenticateToken(ctx context.Context, token string) (*authenticator.Response, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := t.reviews.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("creating a TokenReview: %w", err)
	}
	if !review.Status.Authenticated {
		// status.error says why; the scraper is not told (it would only learn why its guess failed).
		return nil, false, nil
	}
	u := review.Status.User
	var extra map[string][]string
	if len(u.Extra) > 0 {
		extra = make(map[string][]string, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = v
		}
	}
	return &authenticator.Response{User: &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}}, true, nil
}
