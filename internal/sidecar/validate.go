package sidecar

import (
	"errors"
	"fmt"
	"net"
	"strconv"
)

// Validate refuses a configuration the sidecar cannot serve with. It names every problem, each by its
// flag, so that one start shows them all: a listener that cannot bind fails only once the others
// serve, and a missing identity would otherwise surface one field per start.
func (c Config) Validate() error {
	var errs []error
	if c.Namespace == "" {
		errs = append(errs, errors.New("--namespace is required (or POD_NAMESPACE, from the downward API)"))
	}
	if c.Identity.BrokerID < 0 {
		errs = append(errs, fmt.Errorf("--broker-id=%d: must be the broker's node.id, 0 or more", c.Identity.BrokerID))
	}
	if c.Identity.PodName == "" {
		// Without it the operator cannot tell when this broker is gone, and never fences its partitions.
		errs = append(errs, errors.New("--pod-name is required (or POD_NAME, from the downward API)"))
	}
	if (c.ProxyListenAddress == "") != (c.ProxyUpstreamAddress == "") {
		errs = append(errs, errors.New("proxy mode needs both --proxy-listen-address and --proxy-upstream-address"))
	}
	errs = append(errs, c.validateAddresses()...)
	errs = append(errs, c.ProxyTLS.validate()...)
	return errors.Join(errs...)
}

// listenFlag is one of the sidecar's listen addresses, by its flag.
type listenFlag struct {
	flag, address string
	host          string
	port          int
}

// validateAddresses checks the form of every address, that no two of the sidecar's listeners take
// one port (they share the broker pod's network), and that plain-HTTP metrics stay on loopback.
func (c Config) validateAddresses() []error {
	var errs []error
	if c.ListenAddress == "" {
		errs = append(errs, errors.New("--listen-address is required"))
	}
	var listens []listenFlag
	for _, l := range c.listenFlags() {
		host, port, err := splitAddress(l.flag, l.address)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l.host, l.port = host, port
		listens = append(listens, l)
	}
	if c.ProxyUpstreamAddress != "" {
		if host, port, err := splitAddress("--proxy-upstream-address", c.ProxyUpstreamAddress); err != nil {
			errs = append(errs, err)
		} else if host == "" || port == 0 {
			errs = append(errs, fmt.Errorf("--proxy-upstream-address=%q: want the host and port of the broker's listener", c.ProxyUpstreamAddress))
		}
	}
	errs = append(errs, sharedPorts(listens)...)
	if err := c.validateMetricsAddress(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// listenFlags are the addresses the sidecar listens on, those turned off left out.
func (c Config) listenFlags() []listenFlag {
	var out []listenFlag
	add := func(flag, address string) {
		if address != "" && address != "0" {
			out = append(out, listenFlag{flag: flag, address: address})
		}
	}
	add("--listen-address", c.ListenAddress)
	add("--proxy-listen-address", c.ProxyListenAddress)
	add("--health-probe-bind-address", c.HealthProbeBindAddress)
	add("--pprof-bind-address", c.PprofBindAddress)
	add("--metrics-bind-address", c.metricsAddress())
	return out
}

// splitAddress splits a [host]:port address, and says what is wrong with one that is not.
func splitAddress(flag, address string) (string, int, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return "", 0, fmt.Errorf("%s=%q: want [host]:port: %w", flag, address, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("%s=%q: the port must be a number from 0 to 65535", flag, address)
	}
	return host, n, nil
}

// sharedPorts reports two listeners on the same port whose hosts overlap: one would fail to bind,
// and only after the other serves.
func sharedPorts(listens []listenFlag) []error {
	var errs []error
	for i, a := range listens {
		for _, b := range listens[i+1:] {
			if a.port != 0 && a.port == b.port && (a.host == b.host || anyHost(a.host) || anyHost(b.host)) {
				errs = append(errs, fmt.Errorf("%s=%s and %s=%s take the same port", a.flag, a.address, b.flag, b.address))
			}
		}
	}
	return errs
}

// anyHost says whether a listen host is every address of the machine, which overlaps any other.
func anyHost(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}
