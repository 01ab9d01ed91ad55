package kafkacluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Clients runs Kafka's own clients against a cluster: ShareTool (compiled by CompileShareTool) and
// Kafka's tools, each a JVM of its own.
type Clients struct {
	// Assets is the directory of Kafka's jars; ShareTool the directory of ShareTool's class.
	Assets, ShareTool string
	// Bootstrap is the cluster's bootstrap servers.
	Bootstrap string
	// Dir keeps the clients' logs.
	Dir string
}

// clientJVMOptions are the clients' JVM flags: small, quick to start.
var clientJVMOptions = []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dlog4j2.level=WARN"}

// Run runs mainClass with args to completion and returns its stdout; its stderr is kept in Dir.
func (c Clients) Run(ctx context.Context, mainClass string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, Java(), c.javaArgs(mainClass, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	_ = appendFile(filepath.Join(c.Dir, "clients.log"), fmt.Sprintf("=== %s %s\n%s%s", mainClass, strings.Join(args, " "), stdout.String(), stderr.String()))
	if err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w\nstdout:\n%s\nstderr (end):\n%s", mainClass, strings.Join(args, " "), err,
			stdout.String(), tailString(stderr.String(), 3000))
	}
	return stdout.String(), nil
}

func appendFile(path, s string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(s)
	return errors.Join(err, f.Close())
}

// javaArgs are the JVM's arguments that run mainClass with args on Kafka's jars and ShareTool.
func (c Clients) javaArgs(mainClass string, args ...string) []string {
	out := append(slices.Clone(clientJVMOptions), "-cp", Classpath(c.Assets, c.ShareTool), mainClass)
	return append(out, args...)
}

// startShareTool starts ShareTool with args as proc, its stdout (the record of what it did, one
// line a fact) in the file out, its stderr in proc's log.
func (c Clients) startShareTool(proc *process, out string, args ...string) error {
	shell := fmt.Sprintf("exec %q \"$@\" > %q", Java(), out)
	return proc.start(nil, "/bin/sh", append([]string{"-c", shell, "sh"}, c.javaArgs("ShareTool", args...)...)...)
}

func tailString(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Setup creates topic with partitions and replicas, and sets group's share.auto.offset.reset to
// earliest; it returns the topic's id.
func (c Clients) Setup(ctx context.Context, topic string, partitions, replicas int, group string) (string, error) {
	out, err := c.Run(ctx, "ShareTool", "setup", c.Bootstrap, topic, fmt.Sprint(partitions), fmt.Sprint(replicas), group)
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(out) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "TOPIC_ID "); ok {
			return id, nil
		}
	}
	return "", fmt.Errorf("ShareTool setup printed no topic id:\n%s", out)
}

// DeleteTopic deletes topic with Kafka's Admin (deleteTopics), returning once the controller has.
func (c Clients) DeleteTopic(ctx context.Context, topic string) error {
	out, err := c.Run(ctx, "ShareTool", "delete-topic", c.Bootstrap, topic)
	if err != nil {
		return err
	}
	if !strings.Contains(out, "DELETED "+topic) {
		return fmt.Errorf("ShareTool delete-topic did not say it deleted %s:\n%s", topic, out)
	}
	return nil
}

// Produce produces count records to topic with acks=all, spread over its partitions in turn.
func (c Clients) Produce(ctx context.Context, topic string, count int) error {
	_, err := c.Run(ctx, "ShareTool", "produce", c.Bootstrap, topic, fmt.Sprint(count))
	return err
}

// Leaders returns the node id leading each partition of topic (-1: none), by partition.
func (c Clients) Leaders(ctx context.Context, topic string) (map[int32]int32, error) {
	parts, err := c.Partitions(ctx, topic)
	if err != nil {
		return nil, err
	}
	leaders := map[int32]int32{}
	for p, info := range parts {
		leaders[p] = info.Leader
	}
	return leaders, nil
}

// PartitionInfo is a partition's leader (-1: none) and the size of its in-sync replica set.
type PartitionInfo struct {
	Leader int32
	ISR    int
}

// Partitions describes each partition of topic, by partition.
func (c Clients) Partitions(ctx context.Context, topic string) (map[int32]PartitionInfo, error) {
	out, err := c.Run(ctx, "ShareTool", "leaders", c.Bootstrap, topic)
	if err != nil {
		return nil, err
	}
	parts := map[int32]PartitionInfo{}
	for line := range strings.Lines(out) {
		var p int32
		var info PartitionInfo
		if _, err := fmt.Sscanf(line, "LEADER %d %d ISR %d", &p, &info.Leader, &info.ISR); err == nil {
			parts[p] = info
		}
	}
	if len(parts) == 0 {
		return nil, fmt.Errorf("ShareTool leaders printed none:\n%s", out)
	}
	return parts, nil
}

// ShareGroups runs Kafka's kafka-share-groups.sh (ShareGroupCommand) with args.
func (c Clients) ShareGroups(ctx context.Context, args ...string) (string, error) {
	return c.Run(ctx, "org.apache.kafka.tools.consumer.group.ShareGroupCommand", append([]string{"--bootstrap-server", c.Bootstrap}, args...)...)
}

// Consumer is a running ShareTool share consumer.
type Consumer struct {
	Name string
	out  string
	proc process
}

// StartConsumer starts a share consumer of group on topic that releases the first delivery of every
// offset that is a multiple of releaseEvery (0: none) and stops after idle without records.
func (c Clients) StartConsumer(name, topic, group string, releaseEvery int, idle time.Duration) (*Consumer, error) {
	return c.StartConsumerWith(name, topic, group, ConsumerOptions{ReleaseEvery: releaseEvery, Idle: idle})
}

// Stop asks the consumer to close (SIGTERM: it closes its KafkaShareConsumer, which acknowledges
// nothing more and releases what it holds) and waits for it.
func (con *Consumer) Stop() { con.proc.stop(30 * time.Second) }

// Kill ends the consumer at once.
func (con *Consumer) Kill() { con.proc.kill() }

// Wait waits up to timeout for the consumer to exit by itself (idle).
func (con *Consumer) Wait(timeout time.Duration) bool { return con.proc.wait(timeout) }

// Running reports whether the consumer runs.
func (con *Consumer) Running() bool { return con.proc.running() }

// Log is the consumer's stderr.
func (con *Consumer) Log() string { return con.proc.logTail(1 << 20) }

// Outcome is one record a consumer acknowledged, with a commit that succeeded.
type Outcome struct {
	Consumer      string
	Action        string // ACCEPTED or RELEASED; FAILED-ACCEPTED or FAILED-RELEASED when its commit failed
	Partition     int32
	Offset        int64
	DeliveryCount int
}

// Outcomes parses what the consumer printed so far: the records whose acknowledgement committed,
// and how many failed or errored.
func (con *Consumer) Outcomes() (outcomes []Outcome, failures []string, err error) {
	f, err := os.Open(con.out)
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	return ParseOutcomes(f, con.Name)
}

// ParseOutcomes parses what ShareTool's consume printed (its file, or its pod's log), as consumer's.
func ParseOutcomes(r io.Reader, consumer string) (outcomes []Outcome, failures []string, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "ACCEPTED", "RELEASED":
			if len(fields) != 4 {
				continue // a line cut short by a kill
			}
			p, err1 := strconv.ParseInt(fields[1], 10, 32)
			o, err2 := strconv.ParseInt(fields[2], 10, 64)
			d, err3 := strconv.Atoi(fields[3])
			if err1 != nil || err2 != nil || err3 != nil {
				continue
			}
			outcomes = append(outcomes, Outcome{Consumer: consumer, Action: fields[0], Partition: int32(p), Offset: o, DeliveryCount: d})
		case "FAILED":
			// The acknowledgement's commit failed: its outcome is unknown to the consumer. The broker
			// may have stored it before failing to answer (a leader killed between its Write and its
			// answer), and then the record is never delivered again.
			if len(fields) >= 5 {
				p, err1 := strconv.ParseInt(fields[2], 10, 32)
				o, err2 := strconv.ParseInt(fields[3], 10, 64)
				d, err3 := strconv.Atoi(fields[4])
				if err1 == nil && err2 == nil && err3 == nil {
					outcomes = append(outcomes, Outcome{Consumer: consumer, Action: "FAILED-" + fields[1], Partition: int32(p), Offset: o, DeliveryCount: d})
				}
			}
			failures = append(failures, sc.Text())
		case "ERROR":
			failures = append(failures, sc.Text())
		}
	}
	return outcomes, failures, sc.Err()
}
