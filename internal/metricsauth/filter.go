package metricsauth

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
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

// TokenAuthenticator says whose a bearer token is: not ok when the API server refuses the token, an
// error when it could not be asked.
type TokenAuthenticator interface {
	AuthenticateToken(ctx context.Context, token string) (user authenticationv1.UserInfo, ok bool, err error)
}

// Authorizer says whether user may use verb on the non-resource URL path, and if not, why; an error
// when it could not be asked.
type Authorizer interface {
	Authorize(ctx context.Context, user authenticationv1.UserInfo, verb, path string) (allowed bool, reason string, err error)
}

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
	return Filter(newTokenReviewer(authn.TokenReviews(), clock.RealClock{}), newAccessReviewer(authz.SubjectAccessReviews(), clock.RealClock{})), nil
}

// Filter returns a metrics filter that authenticates a request's bearer token with tokens and
// authorizes its user for the request's method (lower-cased: get) on its path with access.
func Filter(tokens TokenAuthenticator, access Authorizer) metricsserver.Filter {
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, ok := bearerToken(r)
			if !ok {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			user, ok, err := tokens.AuthenticateToken(r.Context(), token)
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
			allowed, reason, err := access.Authorize(r.Context(), user, strings.ToLower(r.Method), r.URL.Path)
			switch {
			case err != nil:
				log.Error(err, "Reviewing a scraper's access failed", "user", user.Username)
				http.Error(w, "Authorization failed", http.StatusInternalServerError)
				return
			case !allowed:
				log.V(4).Info("Refused a scrape by a user without access", "user", user.Username, "reason", reason)
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
