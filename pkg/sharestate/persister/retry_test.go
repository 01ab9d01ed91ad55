package persister

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What the persister does with each kind of API failure: semantics §3's retriable errors come from the
// classes retried here.
func TestClassify(t *testing.T) {
	gr := schema.GroupResource{Group: "sharestate.dev", Resource: "sharepartitionstates"}
	tests := []struct {
		name string
		err  error
		want errorClass
	}{
		{"none", nil, classOK},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("moved")), classConflict},
		{"not found", apierrors.NewNotFound(gr, "x"), classNotFound},
		{"already exists", apierrors.NewAlreadyExists(gr, "x"), classExists},
		{"429", apierrors.NewTooManyRequests("slow down", 1), classRetriable},
		{"500", apierrors.NewInternalError(errors.New("boom")), classRetriable},
		{"503", apierrors.NewServiceUnavailable("down"), classRetriable},
		{"504", apierrors.NewTimeoutError("slow", 1), classRetriable},
		{"server timeout", apierrors.NewServerTimeout(gr, "update", 1), classRetriable},
		{"connection refused", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, classRetriable},
		{"deadline", context.DeadlineExceeded, classRetriable},
		{"wrapped conflict", fmt.Errorf("updating: %w", apierrors.NewConflict(gr, "x", errors.New("moved"))), classConflict},
		{"forbidden", apierrors.NewForbidden(gr, "x", errors.New("no")), classPermanent},
		{"invalid", apierrors.NewBadRequest("bad"), classPermanent},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("%s: classify = %d, want %d", tt.name, got, tt.want)
		}
	}
}
