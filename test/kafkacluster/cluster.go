package kafkacluster

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure a cluster.
type Options struct {
	// Dir keeps every node's data, configuration and log (a test's temporary directory).
	Dir string
	// Assets is the directory of Kafka's jars (Assets).
	Assets string
	// Nodes is the number of KRaft nodes, each a broker and a controller (default 3).
	Nodes int
	// Sidecars, when set, fronts each broker's inter-broker listener with a sidecar in proxy mode.
	Sidecars *SidecarOptions
	// BypassProxy lists nodes that advertise their real inter-broker listener (ReplicationAddress)
	// instead of their sidecar's proxy: a misconfiguration, whose peers reach the broker around the proxy.
	BypassProxy []int32
	// Listeners are extra PLAINTEXT listeners every broker binds and advertises (listeners.go).
	Listeners []Listener
	// BrokerConfig is added to (and overrides) every node's generated server.properties.
	BrokerConfig map[string]string
	// JVMOptions are the nodes' JVM flags (default DefaultJVMOptions).
	JVMOptions []string
	// StartTimeout bounds the start of every node (default 3 minutes: JVMs on 2 busy cores are slow).
	StartTimeout time.Duration
}

// DefaultJVMOptions are small heaps and a short start: tests run three brokers beside a control plane
// on two cores.
var DefaultJVMOptions = []string{"-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"}

// Cluster is a running Kafka cluster.
type Cluster struct {
	opts      Options
	clusterID string
	Nodes     []*Node
}

// Node is one KRaft node: a broker and a controller in one JVM, and its sidecar if any.
type Node struct {
	ID int32
	// ClientAddress is the CLIENT listener: producers, consumers and admin tools.
	ClientAddress string
	// ReplicationAddress is where the inter-broker listener (REPLICATION) is bound.
	ReplicationAddress string
	// AdvertisedReplication is the address the broker advertises for REPLICATION: its proxy's with
	// sidecars, else ReplicationAddress.
	AdvertisedReplication string
	// ControllerAddress is the KRaft controller listener.
	ControllerAddress string
	// Sidecar is the node's sidecar (nil without Options.Sidecars).
	Sidecar *Sidecar

	dir     string
	cluster *Cluster
	proc    process
}

// Start formats and starts the nodes (and their sidecars first, since the brokers reach each other
// through them), and waits until every broker has started.
func Start(opts Options) (*Cluster, error) {
	if opts.Nodes == 0 {
		opts.Nodes = 3
	}
	if opts.JVMOptions == nil {
		opts.JVMOptions = DefaultJVMOptions
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 3 * time.Minute
	}
	c := &Cluster{opts: opts, clusterID: newClusterID()}
	if err := c.layOut(); err != nil {
		return nil, err
	}
	if err := c.startSidecars(); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.format(); err != nil {
		c.Stop()
		return nil, err
	}
	for _, n := range c.Nodes {
		if err := n.startJVM(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := n.AwaitStarted(opts.StartTimeout); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// newClusterID is a Kafka cluster id: 16 random bytes in URL-safe base64 without padding, not
// starting with '-' (which Kafka's Uuid.randomUuid avoids, as it reads as a command-line flag).
func newClusterID() string {
	for {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		id := base64.RawURLEncoding.EncodeToString(b)
		if id[0] != '-' {
			return id
		}
	}
}

// layOut picks every node's ports and directory.
func (c *Cluster) layOut() error {
	perNode := 3
	if c.opts.Sidecars != nil {
		perNode += sidecarPorts
	}
	ports, err := freePorts(c.opts.Nodes * perNode)
	if err != nil {
		return err
	}
	for i := range c.opts.Nodes {
		p := ports[i*perNode:]
		n := &Node{
			ID: int32(i), cluster: c, dir: filepath.Join(c.opts.Dir, fmt.Sprintf("kafka-%d", i)),
			ClientAddress:      loopback(p[0]),
			ReplicationAddress: loopback(p[1]),
			ControllerAddress:  loopback(p[2]),
		}
		n.AdvertisedReplication = n.ReplicationAddress
		if c.opts.Sidecars != nil {
			n.Sidecar = newSidecar(n, p[3:3+sidecarPorts])
			if !slices.Contains(c.opts.BypassProxy, n.ID) {
				n.AdvertisedReplication = n.Sidecar.ProxyAddress
			}
		}
		n.proc = process{name: n.Name(), logPath: filepath.Join(c.opts.Dir, n.Name()+".log")}
		if err := os.MkdirAll(n.dir, 0o755); err != nil {
			return err
		}
		c.Nodes = append(c.Nodes, n)
	}
	return nil
}

func loopback(port int) string { return fmt.Sprintf("127.0.0.1:%d", port) }

// Name is the node's name, and its pod's: kafka-<id>.
func (n *Node) Name() string { return fmt.Sprintf("kafka-%d", n.ID) }

// BootstrapServers is every node's client listener, for producers, consumers and tools.
func (c *Cluster) BootstrapServers() string {
	addrs := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		addrs = append(addrs, n.ClientAddress)
	}
	return strings.Join(addrs, ",")
}

// Node is the node with id.
func (c *Cluster) Node(id int32) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// properties is the node's server.properties: the listeners of docs/kafka-integration.md §3 on
// loopback, a static controller quorum of every node, and small internal topics.
func (n *Node) properties() map[string]string {
	c := n.cluster
	voters := make([]string, 0, len(c.Nodes))
	for _, o := range c.Nodes {
		voters = append(voters, fmt.Sprintf("%d@%s", o.ID, o.ControllerAddress))
	}
	replicas := min(3, len(c.Nodes))
	extra := n.extraListeners()
	props := map[string]string{
		"process.roles":            "broker,controller",
		"node.id":                  fmt.Sprint(n.ID),
		"controller.quorum.voters": strings.Join(voters, ","),
		"listeners": fmt.Sprintf("CLIENT://%s,REPLICATION://%s,CONTROLLER://%s",
			n.ClientAddress, n.ReplicationAddress, n.ControllerAddress) + extra.listeners,
		"advertised.listeners":                             fmt.Sprintf("CLIENT://%s,REPLICATION://%s", n.ClientAddress, n.AdvertisedReplication) + extra.advertised,
		"listener.security.protocol.map":                   "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT" + extra.protocols,
		"inter.broker.listener.name":                       "REPLICATION",
		"controller.listener.names":                        "CONTROLLER",
		"log.dirs":                                         filepath.Join(n.dir, "data"),
		"num.partitions":                                   "1",
		"default.replication.factor":                       fmt.Sprint(replicas),
		"min.insync.replicas":                              fmt.Sprint(max(1, replicas-1)),
		"offsets.topic.replication.factor":                 fmt.Sprint(replicas),
		"offsets.topic.num.partitions":                     "3",
		"transaction.state.log.replication.factor":         fmt.Sprint(replicas),
		"transaction.state.log.min.isr":                    fmt.Sprint(max(1, replicas-1)),
		"share.coordinator.state.topic.replication.factor": fmt.Sprint(replicas),
		"share.coordinator.state.topic.min.isr":            fmt.Sprint(max(1, replicas-1)),
		// Few state partitions: each is a share coordinator to load at start and at every failover.
		"share.coordinator.state.topic.num.partitions": "3",
		"group.initial.rebalance.delay.ms":             "0",
		// A lost consumer or broker is noticed in seconds, not Kafka's 45 s.
		"group.share.min.session.timeout.ms":    "6000",
		"group.share.session.timeout.ms":        "6000",
		"group.share.min.heartbeat.interval.ms": "1000",
		"group.share.heartbeat.interval.ms":     "1000",
		// Brokers notice a dead peer quickly.
		"broker.session.timeout.ms":    "6000",
		"broker.heartbeat.interval.ms": "1000",
		"log.flush.interval.messages":  "9223372036854775807",
	}
	maps.Copy(props, c.opts.BrokerConfig)
	return props
}

func (n *Node) writeConfig() (string, error) {
	props := n.properties()
	keys := slices.Sorted(maps.Keys(props))
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, props[k])
	}
	path := filepath.Join(n.dir, "server.properties")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	logConfig := filepath.Join(n.dir, "log4j2.yaml")
	return path, os.WriteFile(logConfig, []byte(log4jConfig), 0o644)
}

// log4jConfig sends the broker's log to stderr (the node's log file), at INFO, with share groups'
// and the persister's own loggers at DEBUG for what a failed test needs to show.
const log4jConfig = `Configuration:
  Appenders:
    Console:
      name: STDERR
      target: SYSTEM_ERR
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Logger:
      - name: kafka.server.share
        level: DEBUG
        additivity: false
        AppenderRef:
          - ref: STDERR
      - name: org.apache.kafka.server.share.persister
        level: DEBUG
        additivity: false
        AppenderRef:
          - ref: STDERR
    Root:
      level: INFO
      AppenderRef:
        - ref: STDERR
`

// format writes every node's configuration and formats its storage, the nodes at once.
func (c *Cluster) format() error {
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.format() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (n *Node) format() error {
	config, err := n.writeConfig()
	if err != nil {
		return err
	}
	cmd := exec.Command(Java(), n.jvmArgs("kafka.tools.StorageTool", "format", "--config", config,
		"--cluster-id", n.cluster.clusterID, "--ignore-formatted")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("formatting %s: %w\n%s", n.Name(), err, out)
	}
	return nil
}

func (n *Node) jvmArgs(mainClass string, args ...string) []string {
	out := slices.Clone(n.cluster.opts.JVMOptions)
	out = append(out, "-Dlog4j2.configurationFile="+filepath.Join(n.dir, "log4j2.yaml"),
		"-cp", Classpath(n.cluster.opts.Assets), mainClass)
	return append(out, args...)
}

// startJVM starts the node's broker and controller.
func (n *Node) startJVM() error {
	return n.proc.start(nil, Java(), n.jvmArgs("kafka.Kafka", filepath.Join(n.dir, "server.properties"))...)
}

// startedLine is what Kafka logs when a KRaft node has started (KafkaRaftServer.startup).
const startedLine = "Kafka Server started"

// AwaitStarted waits until the node's log says it started since its last (re)start, and its client
// listener accepts connections.
func (n *Node) AwaitStarted(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if !n.proc.running() {
			return fmt.Errorf("%s exited while starting; its log ends:\n%s", n.Name(), n.proc.logTail(4000))
		}
		if n.startedSinceLastStart() {
			return awaitDial(n.ClientAddress, time.Until(deadline))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not start within %v; its log ends:\n%s", n.Name(), timeout, n.proc.logTail(4000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// startedSinceLastStart reports whether the log holds startedLine after its last start marker.
func (n *Node) startedSinceLastStart() bool {
	b, err := os.ReadFile(n.proc.logPath)
	if err != nil {
		return false
	}
	s := string(b)
	if i := strings.LastIndex(s, "=== "); i >= 0 {
		s = s[i:]
	}
	return strings.Contains(s, startedLine)
}

// Log is the node's whole log, every start of it.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.proc.logPath)
	return string(b)
}

// LogPath is the node's log file.
func (n *Node) LogPath() string { return n.proc.logPath }

// Kill ends the node's JVM at once (SIGKILL).
func (n *Node) Kill() { n.proc.kill() }

// Pause stops the node's JVM (SIGSTOP) without ending it: a broker that seems dead to its peers.
func (n *Node) Pause() error { return n.proc.signal(syscall.SIGSTOP) }

// Resume lets a paused node run again (SIGCONT).
func (n *Node) Resume() error { return n.proc.signal(syscall.SIGCONT) }

// Stop shuts the node down as Kafka's controlled shutdown does (SIGTERM), killing it after 2 minutes.
func (n *Node) Stop() { n.proc.stop(2 * time.Minute) }

// Restart starts a stopped or killed node again on its data and waits until it has started.
func (n *Node) Restart(timeout time.Duration) error {
	if n.proc.running() {
		return fmt.Errorf("%s is running", n.Name())
	}
	if err := n.startJVM(); err != nil {
		return err
	}
	return n.AwaitStarted(timeout)
}

// Running reports whether the node's JVM runs.
func (n *Node) Running() bool { return n.proc.running() }

// Stop stops every node, then every sidecar.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Go(func() { n.proc.stop(30 * time.Second) })
	}
	wg.Wait()
	for _, n := range c.Nodes {
		if n.Sidecar != nil {
			n.Sidecar.Stop()
		}
	}
}

// DataDir is the node's log directory (log.dirs).
func (n *Node) DataDir() string { return filepath.Join(n.dir, "data") }

// PID is the node's JVM's process id, 0 when it does not run: for its CPU time and memory.
func (n *Node) PID() int { return n.proc.pid() }
