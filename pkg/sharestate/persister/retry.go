package persister

import (
	"context"
	"errors"
	"math"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

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

// backoff spaces the retries of one operation: exponential from 20 ms to 1 s, each interval within
// ±20 % of that at random, so that persisters retrying together do not stay in step. (wait.Backoff's
// jitter only stretches an interval, by up to Jitter times it: 16 ms stretched by up to half is 16 to
// 24 ms.) Its zero value is ready to use.
type backoff struct{ steps *wait.Backoff }

// next returns the next interval.
func (b *backoff) next() time.Duration {
	if b.steps == nil {
		// Steps only bounds the growth: past the cap, Step keeps answering the cap (with jitter).
		b.steps = &wait.Backoff{Duration: 16 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 800 * time.Millisecond}
	}
	return b.steps.Step()
}

// wait sleeps the next interval; it returns false when ctx ends first.
func (b *backoff) wait(ctx context.Context) bool {
	t := time.NewTimer(b.next())
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
