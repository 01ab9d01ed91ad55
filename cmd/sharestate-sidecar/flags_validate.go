package main

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
)

// validateFlags refuses flag values the sidecar would otherwise take silently for something else: a
// zero limit that a library reads as "use the default", a negative timeout; and what the sidecar
// cannot run without. Every problem is reported at once, so that one start shows them all.
func validateFlags(f *flags) error {
	cfg := f.Config
	var errs []error
	if !f.brokerIDSet {
		errs = append(errs, errors.New("--broker-id is required: the node.id of the broker this sidecar serves"))
	}
	errs = append(errs, cfg.Validate())
	if cfg.Namespace != "" {
		if problems := validation.IsDNS1123Label(cfg.Namespace); len(problems) > 0 {
			errs = append(errs, fmt.Errorf("--namespace=%q is not a valid namespace name: %s", cfg.Namespace, problems[0]))
		}
	}
	errs = append(errs,
		atLeast("--max-request-bytes", int64(cfg.MaxRequestBytes), 1),
		atLeast("--max-queued-request-bytes", cfg.MaxQueuedRequestBytes, int64(max(cfg.MaxRequestBytes, 1))),
		atLeast("--max-in-flight-per-connection", int64(cfg.MaxInFlightPerConnection), 1),
		atLeast("--max-pending-writes", int64(cfg.MaxPendingWrites), 1),
		atLeast("--max-cache-bytes", cfg.MaxCacheBytes, 1),
		atLeast("--kube-api-burst", int64(cfg.WriteBurst), 1),
		atLeast("--kube-api-bulk-burst", int64(cfg.BulkBurst), 1),
		positive("--idle-timeout", cfg.IdleTimeout),
		positive("--request-timeout", cfg.RequestTimeout),
		positive("--operation-timeout", cfg.OperationTimeout),
	)
	if cfg.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("--shutdown-timeout=%s: must not be negative", cfg.ShutdownTimeout))
	}
	if cfg.ProxyMetadataInterval < 0 {
		errs = append(errs, fmt.Errorf("--proxy-metadata-interval=%s: must not be negative (0 disables it)", cfg.ProxyMetadataInterval))
	}
	return errors.Join(errs...)
}

func atLeast(flag string, v, least int64) error {
	if v < least {
		return fmt.Errorf("%s=%d: must be at least %d", flag, v, least)
	}
	return nil
}

func positive(flag string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s=%s: must be above zero", flag, d)
	}
	return nil
}
