package kafkacluster

import (
	"fmt"
	"strings"
)

// Listener is a PLAINTEXT listener every broker binds beside its CLIENT, REPLICATION and CONTROLLER
// listeners, and advertises at an address of the test's choosing: that of a TCP proxy in front of
// it, say, so that a client bootstrapped at the proxies reaches every partition leader through them.
type Listener struct {
	// Name is the listener's name in listeners, advertised.listeners and
	// listener.security.protocol.map, e.g. HAPROXY; not one of the cluster's own.
	Name string
	// Bind is where each node binds the listener, by node id; every node needs one.
	Bind map[int32]string
	// Advertise is what each node advertises for it, by node id; every node needs one.
	Advertise map[int32]string
}

// FrontedListener is a Listener named name for nodes nodes (ids 0 to nodes-1) on loopback, whose
// every node binds a free port and advertises another free port, where the test starts the proxy
// that fronts it.
func FrontedListener(name string, nodes int) (Listener, error) {
	ports, err := freePorts(2 * nodes)
	if err != nil {
		return Listener{}, err
	}
	l := Listener{Name: name, Bind: map[int32]string{}, Advertise: map[int32]string{}}
	for i := range nodes {
		id := int32(i)
		l.Bind[id], l.Advertise[id] = loopback(ports[2*i]), loopback(ports[2*i+1])
	}
	return l, nil
}

// listenerProperties are the extra listeners' entries of a node's listeners, advertised.listeners
// and listener.security.protocol.map, each with a leading comma, to follow the cluster's own.
type listenerProperties struct {
	listeners, advertised, protocols string
}

// extraListeners is the node's part of the cluster's Options.Listeners.
func (n *Node) extraListeners() listenerProperties {
	var l, a, p strings.Builder
	for _, x := range n.cluster.opts.Listeners {
		fmt.Fprintf(&l, ",%s://%s", x.Name, x.Bind[n.ID])
		fmt.Fprintf(&a, ",%s://%s", x.Name, x.Advertise[n.ID])
		fmt.Fprintf(&p, ",%s:PLAINTEXT", x.Name)
	}
	return listenerProperties{listeners: l.String(), advertised: a.String(), protocols: p.String()}
}
