// Package chart tests the helm chart charts/sharestate-operator: it renders the chart with the
// pinned helm (hack/tools/helm) for several value sets and checks the objects it would install
// against the generated CRDs and RBAC rules, and the values against the chart's schema and README.
// The tests need no cluster; they build bin/helm when it is missing or not the pinned version.
package chart
