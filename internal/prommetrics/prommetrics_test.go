package prommetrics

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire"
	"github.com/sharestate/sharestate-operator/pkg/sharestate/kafkawire/serve"
)

// value is the value of the series of name with exactly these labels (a histogram's count).
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			if len(got) != len(labels) {
				continue
			}
			match := true
			for k, v := range labels {
				match = match && got[k] == v
			}
			if !match {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

type want struct {
	name   string
	labels map[string]string
	value  float64
}

func check(t *testing.T, reg *prometheus.Registry, wants []want) {
	t.Helper()
	for _, w := range wants {
		if got := value(t, reg, w.name, w.labels); got != w.value {
			t.Errorf("%s%v = %v, want %v", w.name, w.labels, got, w.value)
		}
	}
}

// Each persister observation lands in the metric its name in docs/operations.md says.
func TestPersisterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := NewPersisterObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	o.Operation("write", sharestate.ErrFencedStateEpoch)
	o.WriteAnswered(time.Millisecond)
	o.StatusUpdated(time.Millisecond)
	o.StatusStored(2048)
	o.WritesCombined(3)
	o.APIRequest("update_status", "conflict")
	o.Conflict()
	check(t, reg, []want{
		{"sharestate_persister_operations_total", map[string]string{"operation": "write", "result": "FENCED_STATE_EPOCH"}, 1},
		{"sharestate_persister_write_duration_seconds", nil, 1},
		{"sharestate_persister_status_update_duration_seconds", nil, 1},
		{"sharestate_persister_status_bytes", nil, 1},
		{"sharestate_persister_writes_per_update", nil, 1},
		{"sharestate_persister_api_requests_total", map[string]string{"verb": "update_status", "outcome": "conflict"}, 1},
		{"sharestate_persister_conflicts_total", nil, 1},
	})
}

func TestServerMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := NewServerObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	o.ConnectionOpened()
	o.ConnectionOpened()
	o.ConnectionClosed("idle")
	o.RequestRead()
	o.RequestRead()
	o.RequestWritten()
	o.RequestCounted("WriteShareGroupState", sharestate.ErrNone)
	o.RequestServed("WriteShareGroupState", time.Millisecond)
	check(t, reg, []want{
		{"sharestate_sidecar_connections", nil, 1},
		{"sharestate_sidecar_connections_accepted_total", nil, 2},
		{"sharestate_sidecar_connections_closed_total", map[string]string{"reason": "idle"}, 1},
		{"sharestate_sidecar_requests_in_flight", nil, 1},
		{"sharestate_sidecar_requests_total", map[string]string{"api": "WriteShareGroupState", "error": "NONE"}, 1},
		{"sharestate_sidecar_request_duration_seconds", map[string]string{"api": "WriteShareGroupState"}, 1},
	})
}

func TestProxyMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	o, err := NewProxyObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	o.ConnectionOpened()
	o.ConnectionClosed("upstream_closed")
	o.Request(kafkawire.KeyWriteShareGroupState, serve.RouteAnswered)
	o.Request(0, serve.RouteForwarded)
	o.Request(0, serve.RouteForwarded)
	o.RequestRead()
	o.BytesToUpstream(100)
	o.BytesFromUpstream(40)
	o.UpstreamDialFailed()
	o.UpstreamIdleEnded()
	o.UpstreamRedialed()
	o.APIVersionsUnrewritten("undecodable")
	check(t, reg, []want{
		{"sharestate_proxy_connections", nil, 0},
		{"sharestate_proxy_connections_closed_total", map[string]string{"reason": "upstream_closed"}, 1},
		{"sharestate_proxy_requests_total", map[string]string{"api": "WriteShareGroupState", "route": "answered"}, 1},
		{"sharestate_proxy_requests_total", map[string]string{"api": "Produce", "route": "forwarded"}, 2},
		{"sharestate_proxy_requests_in_flight", nil, 1},
		{"sharestate_proxy_forwarded_bytes_total", map[string]string{"direction": "request"}, 100},
		{"sharestate_proxy_forwarded_bytes_total", map[string]string{"direction": "response"}, 40},
		{"sharestate_proxy_upstream_dial_errors_total", nil, 1},
		{"sharestate_proxy_upstream_idle_ends_total", nil, 1},
		{"sharestate_proxy_upstream_redials_total", nil, 1},
		{"sharestate_proxy_apiversions_unrewritten_total", map[string]string{"reason": "undecodable"}, 1},
	})
}

// Observers made on one registry share its metrics, as the operator's persisters of several
// namespaces do.
func TestObserversOnOneRegistryShareIt(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewPersisterObserver(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewPersisterObserver(reg)
	if err != nil {
		t.Fatalf("a second observer on the same registry: %v", err)
	}
	a.Conflict()
	b.Conflict()
	if n := testutil.ToFloat64(b.(*persisterMetrics).conflicts); n != 2 {
		t.Fatalf("conflicts = %v, want 2", n)
	}
}
