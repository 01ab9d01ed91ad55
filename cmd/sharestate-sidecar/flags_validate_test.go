package main

import (
	"strings"
	"testing"
	"time"

	"github.com/sharestate/sharestate-operator/internal/sidecar"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/persister"
)

// validConfig is the configuration of the flags' defaults, with a broker's identity.
func validConfig() sidecar.Config {
	return sidecar.Config{
		ListenAddress: "127.0.0.1:9089", HealthProbeBindAddress: ":8081", MetricsBindAddress: "0",
		Namespace: "kafka", Identity: persister.Identity{BrokerID: 1, PodName: "kafka-1"},
		MaxRequestBytes: 8 << 20, MaxQueuedRequestBytes: 32 << 20, IdleTimeout: 10 * time.Minute,
		RequestTimeout: 30 * time.Second, MaxInFlightPerConnection: 1024, ShutdownTimeout: 30 * time.Second,
		OperationTimeout: 15 * time.Second, MaxPendingWrites: 4096, MaxCacheBytes: persister.DefaultMaxCacheBytes,
		WriteBurst: 400, BulkBurst: 200,
	}
}

func TestValidateFlags(t *testing.T) {
	if err := validateFlags(validConfig()); err != nil {
		t.Fatalf("the defaults are refused: %v", err)
	}
	cfg := validConfig()
	cfg.Namespace = "Bad_NS"
	cfg.MaxInFlightPerConnection = 0
	cfg.MaxQueuedRequestBytes = 1024
	cfg.IdleTimeout = -time.Second
	cfg.OperationTimeout = 0
	cfg.ProxyMetadataInterval = -time.Second
	err := validateFlags(cfg)
	if err == nil {
		t.Fatal("invalid flags accepted")
	}
	for _, want := range []string{
		`--namespace="Bad_NS" is not a valid namespace name`,
		"--max-in-flight-per-connection=0: must be at least 1",
		"--max-queued-request-bytes=1024: must be at least 8388608",
		"--idle-timeout=-1s: must be above zero",
		"--operation-timeout=0s: must be above zero",
		"--proxy-metadata-interval=-1s: must not be negative",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
}
