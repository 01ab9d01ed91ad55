// Package uninstall tests that the CRDs can be removed, with the operator running and without one,
// each test on a control plane of its own (removing a CRD would break any test sharing it).
package uninstall
