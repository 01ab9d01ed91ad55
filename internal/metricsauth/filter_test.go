package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/utils/clock"
)

// tokens is a TokenAuthenticator: "good" and "nobody" are users, "broken" cannot be reviewed, any
// other token is refused.
type tokens struct{}

func (tokens) AuthenticateToken(_ context.Context, token string) (authenticationv1.UserInfo, bool, error) {
	switch token {
	case "good", "nobody":
		return authenticationv1.UserInfo{Username: token}, true, nil
	case "broken":
		return authenticationv1.UserInfo{}, false, errors.New("the API server cannot be reached")
	}
	return authenticationv1.UserInfo{}, false, nil
}

// access allows "good" to get /metrics, cannot review "/broken-authz", and refuses everything else.
type access struct{}

func (access) Authorize(_ context.Context, user authenticationv1.UserInfo, verb, path string) (bool, string, error) {
	switch {
	case user.Username == "good" && verb == "get" && path == "/metrics":
		return true, "", nil
	case path == "/broken-authz":
		return false, "", errors.New("the API server cannot be reached")
	}
	return false, "no rule", nil
}

func TestFilterStatuses(t *testing.T) {
	filter := Filter(tokens{}, access{})
	h, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, path, authorization string
		want                      int
	}{
		{"no token", "/metrics", "", http.StatusUnauthorized},
		{"another scheme", "/metrics", "Basic Z29vZA==", http.StatusUnauthorized},
		{"an empty bearer token", "/metrics", "Bearer ", http.StatusUnauthorized},
		{"a token the API server refuses", "/metrics", "Bearer garbage", http.StatusUnauthorized},
		{"a token that cannot be reviewed", "/metrics", "Bearer broken", http.StatusInternalServerError},
		{"a user without access", "/metrics", "Bearer nobody", http.StatusForbidden},
		{"a user with access", "/metrics", "Bearer good", http.StatusOK},
		{"the scheme in any case", "/metrics", "bearer good", http.StatusOK},
		{"a user with access elsewhere", "/debug", "Bearer good", http.StatusForbidden},
		{"access that cannot be reviewed", "/broken-authz", "Bearer good", http.StatusInternalServerError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tc.path, nil)
			if tc.authorization != "" {
				req.Header.Set("Authorization", tc.authorization)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d (%q), want %d", rec.Code, rec.Body.String(), tc.want)
			}
			if tc.want == http.StatusOK && rec.Body.String() != "metrics" {
				t.Fatalf("body %q: the request did not reach the handler", rec.Body.String())
			}
		})
	}
}

// The API server's verdict on a token: refused (with its reason in status.error, as kube-apiserver
// gives it) is unauthenticated, not an error; a review that fails is an error; an accepted token
// names its user.
func TestTokenReviewer(t *testing.T) {
	cs := fakeTokenReviews(func(token string) (authenticationv1.TokenReviewStatus, error) {
		switch token {
		case "good":
			return authenticationv1.TokenReviewStatus{Authenticated: true,
				User: authenticationv1.UserInfo{Username: "system:serviceaccount:ns:scraper", Groups: []string{"system:serviceaccounts"}}}, nil
		case "broken":
			return authenticationv1.TokenReviewStatus{}, errors.New("connection refused")
		}
		return authenticationv1.TokenReviewStatus{Error: "[invalid bearer token, square/go-jose: compact JWS format must have three parts]"}, nil
	})
	r := newTokenReviewer(cs.AuthenticationV1().TokenReviews(), clock.RealClock{})
	r.backoff = fastBackoff
	ctx := context.Background()
	if user, ok, err := r.AuthenticateToken(ctx, "good"); err != nil || !ok || user.Username != "system:serviceaccount:ns:scraper" || len(user.Groups) != 1 {
		t.Fatalf("a good token: %v, %v, %v", user, ok, err)
	}
	if user, ok, err := r.AuthenticateToken(ctx, "garbage"); err != nil || ok || user.Username != "" {
		t.Fatalf("a refused token: %v, %v, %v; want unauthenticated without an error", user, ok, err)
	}
	if _, ok, err := r.AuthenticateToken(ctx, "broken"); err == nil || ok {
		t.Fatalf("a failed review: %v, %v; want an error", ok, err)
	}
}
