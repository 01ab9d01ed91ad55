package persister

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// errorClass sorts an API request's error by what the persister does next.
type errorClass int

const (
	classOK        errorClass = iota
	classConflict             // the object moved: re-read and re-validate
	classNotFound             // the object is gone
	classExists               // someone created it first
	classRetriable            // the API server is unreachable, overloaded or slow: back off, re-read, retry
	classPermanent            // retrying cannot help (forbidden, invalid, ...)
)

func classify(err error) errorClass {
	if err == nil {
		return classOK
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		// No answer from the API server: a transport error or a timeout. Whether the request took
		// effect is unknown.
		return classRetriable
	}
	switch code := status.Status().Code; {
	case apierrors.IsConflict(err):
		return classConflict
	case apierrors.IsNotFound(err):
		return classNotFound
	case apierrors.IsAlreadyExists(err):
		return classExists
	case code == http.StatusTooManyRequests || code >= http.StatusInternalServerError ||
		apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err):
		return classRetriable
	default:
		return classPermanent
	}
}

// backoff spaces the retries of one operation: exponential from 20 ms to 1 s, with ±20 % jitter so
// that persisters retrying together do not stay in step.
type backoff struct{ next time.Duration }

// wait sleeps the next interval; it returns false when ctx ends first.
func (b *backoff) wait(ctx context.Context) bool {
	if b.next == 0 {
		b.next = 20 * time.Millisecond
	}
	d := time.Duration(float64(b.next) * (0.8 + 0.4*rand.Float64()))
	b.next = min(2*b.next, time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// unavailable is the answer when the API server could not be reached in time (semantics §3: retriable).
func unavailable(err error) sharestate.Outcome {
	return sharestate.Fail(sharestate.ErrCoordinatorNotAvailable, "the Kubernetes API is not available: %v", err)
}
