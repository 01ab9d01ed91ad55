// Package incluster runs the system as a user installs it, on a one-node cluster whose pods really
// run (test/cluster): the README's `helm install` of the operator, from images built here, and a
// stand-in broker pod with the chart's sidecar. Its tests carry the build tag `cluster`; `make
// test-cluster` builds the images and the cluster's binaries and runs them.
package incluster
