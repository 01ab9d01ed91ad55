// Package metricsreg registers a library's metrics on the registry its caller passes: several
// instances given the same registry (persisters of several namespaces, servers started again in one
// process) share the metrics already registered under the same names.
package metricsreg

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it, or returns the collector of the same description
// already registered there.
func Register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var already prometheus.AlreadyRegisteredError
	if errors.As(err, &already) {
		if existing, ok := already.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	return c, err
}

// Into registers *c on reg as Register does and puts the collector to use back into *c, unless *err
// already holds an error; a failure is left in *err. A constructor registers its metrics in a row
// and checks the error once. A nil reg registers nothing.
func Into[C prometheus.Collector](reg prometheus.Registerer, err *error, c *C) {
	if reg == nil || *err != nil {
		return
	}
	*c, *err = Register(reg, *c)
}
