// Command coredns is CoreDNS with only the plugins the test cluster's DNS needs: the Service and Pod
// names of cluster.local from the API server (kubernetes), a cache, the node's address to listen on
// (bind), and the readiness endpoint the harness waits on (ready). Nothing forwards: no name outside the cluster resolves, so nothing
// a pod looks up leaves the machine. CoreDNS's own binary links every plugin it ships; this one
// builds in a fraction of the time.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	// The plugins, registered by their init functions, in the order they run (dnsserver.Directives,
	// the order of CoreDNS's plugin.cfg).
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	dnsserver.Directives = []string{"bind", "ready", "errors", "cache", "kubernetes"}
	coremain.Run()
}
