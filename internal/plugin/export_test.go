package plugin

import (
	"context"
	"io"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// WaitResetForTest runs reset-offsets' wait for request id on sg, as written at sg's generation,
// with c: the tests reach the refusal that follows a write, which the command's own plan prevents.
func WaitResetForTest(ctx context.Context, c client.Client, sg *sharestatev1.ShareGroup, id string, timeout time.Duration) (*sharestatev1.ShareGroup, error) {
	s := &session{client: c, out: io.Discard}
	return s.waitReset(ctx, sg, id, timeout, 50*time.Millisecond)
}
