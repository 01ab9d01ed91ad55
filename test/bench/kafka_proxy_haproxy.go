package bench

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharestate/sharestate-operator/test/kafkacluster"
)

// HAProxy in TCP mode is the proxy family's reference for a second hop in user space: a
// well-tuned C proxy that copies bytes between two sockets and parses nothing. Each broker binds
// an extra listener (haproxyListener) that advertises a frontend of one haproxy process, which
// forwards it to that listener, so that a client bootstrapped at the frontends reaches every
// partition leader through haproxy, as one bootstrapped at the sidecars' proxies reaches them
// through ours.

// haproxyListener names the brokers' listener that haproxy fronts.
const haproxyListener = "HAPROXY"

// haproxyInstall says how to get haproxy where it is missing.
const haproxyInstall = "haproxy is not on PATH; install it (Debian: apt-get install -y haproxy) to measure it"

// haproxyConfig is a configuration of one frontend and one backend per broker, from the advertised
// address (the frontend) to the bound one. Stock settings otherwise: no health checks (a broker
// that is down is the run's failure, not haproxy's to route around), and idle timeouts longer than
// a run, so that haproxy never closes a client's connection that Kafka's clients keep open between
// requests.
func haproxyConfig(l kafkacluster.Listener) string {
	var b strings.Builder
	b.WriteString(`global
    maxconn 4096

defaults
    mode tcp
    timeout connect 5s
    timeout client 30m
    timeout server 30m
`)
	for _, id := range slices.Sorted(maps.Keys(l.Bind)) {
		fmt.Fprintf(&b, "\nfrontend kafka-%d\n    bind %s\n    default_backend kafka-%d\n", id, l.Advertise[id], id)
		fmt.Fprintf(&b, "\nbackend kafka-%d\n    server kafka-%d %s\n", id, id, l.Bind[id])
	}
	return b.String()
}

// startHAProxy writes l's configuration into dir and starts haproxy on it in the foreground, and
// waits until every frontend accepts connections.
func startHAProxy(ctx context.Context, dir string, l kafkacluster.Listener) (*child, error) {
	path, err := exec.LookPath("haproxy")
	if err != nil {
		return nil, err
	}
	config := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(config, []byte(haproxyConfig(l)), 0o644); err != nil {
		return nil, err
	}
	frontends := byNode(l.Advertise)
	// -db: stay in the foreground, so that the child's process is haproxy's.
	return startChild(ctx, dir, "haproxy", path, []string{"-db", "-f", config}, nil, func() bool { return accepting(frontends) })
}

// accepting reports whether every address accepts a TCP connection.
func accepting(addrs []string) bool {
	for _, addr := range addrs {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		_ = c.Close()
	}
	return true
}

// byNode is m's values in the order of their node ids.
func byNode(m map[int32]string) []string {
	out := make([]string, 0, len(m))
	for _, id := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[id])
	}
	return out
}
