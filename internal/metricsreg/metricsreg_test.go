package metricsreg

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func counter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "test_total", Help: "A test counter."})
}

// Two instances given one registry count into the same collector; a nil registry registers nothing.
func TestIntoSharesWhatIsRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	var err error
	first, second := counter(), counter()
	Into(reg, &err, &first)
	Into(reg, &err, &second)
	if err != nil {
		t.Fatal(err)
	}
	second.Inc()
	if got := testutil.ToFloat64(first); got != 1 || first != second {
		t.Fatalf("the second instance counts into its own collector: first %v", got)
	}

	lone := counter()
	Into(nil, &err, &lone)
	if err != nil || lone == first {
		t.Fatalf("a nil registry changed the collector or failed: %v", err)
	}
}

// A collector that cannot be registered leaves its error, and the ones after it are not registered.
func TestIntoStopsAtTheFirstError(t *testing.T) {
	reg := prometheus.NewRegistry()
	var err error
	clash := prometheus.NewGauge(prometheus.GaugeOpts{Name: "test_total", Help: "Another help, another type."})
	c := counter()
	Into(reg, &err, &c)
	Into(reg, &err, &clash)
	if err == nil {
		t.Fatal("a gauge registered under a counter's name")
	}
	later := prometheus.NewCounter(prometheus.CounterOpts{Name: "later_total", Help: "Registered after the error."})
	Into(reg, &err, &later)
	if mfs, _ := reg.Gather(); len(mfs) != 1 {
		t.Fatalf("%d metric families registered, want only the first", len(mfs))
	}
}
