package kafkacluster

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Producer is a running ShareTool produce-loop: Kafka's own KafkaProducer sending at a steady rate
// for a bounded time, with acks=all.
type Producer struct {
	Name string
	out  string
	proc process
}

// StartProduceLoop starts a producer that sends perSecond records a second to topic for d, each to
// the next partition in turn, then waits for every send's outcome and exits.
func (c Clients) StartProduceLoop(name, topic string, d time.Duration, perSecond int) (*Producer, error) {
	p := &Producer{Name: name, out: filepath.Join(c.Dir, name+".out"),
		proc: process{name: name, logPath: filepath.Join(c.Dir, name+".log")}}
	err := c.startShareTool(&p.proc, p.out, "produce-loop", c.Bootstrap, topic, fmt.Sprint(int64(d/time.Second)), fmt.Sprint(perSecond))
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Wait waits up to timeout for the producer to finish.
func (p *Producer) Wait(timeout time.Duration) bool { return p.proc.wait(timeout) }

// Running reports whether the producer runs.
func (p *Producer) Running() bool { return p.proc.running() }

// Kill ends the producer at once.
func (p *Producer) Kill() { p.proc.kill() }

// Log is the producer's stderr.
func (p *Producer) Log() string { return p.proc.logTail(1 << 20) }

// Position is a record's partition and offset.
type Position struct {
	Partition int32
	Offset    int64
}

// ProduceResult is what a produce-loop printed: every acknowledged send, every failed one, and, once
// it has finished (Done), its summary.
type ProduceResult struct {
	Acked    []Position
	Failures []string
	Done     bool
	// The summary, when Done: sends made, acknowledged and failed, the longest stretch of failures
	// (from the first failed send's completion to the next acknowledged one's), and the longest a send
	// waited for its acknowledgement.
	Sent, AckedCount, Failed int64
	LongestFailure, MaxAck   time.Duration
}

// Result parses what the producer printed so far.
func (p *Producer) Result() (ProduceResult, error) {
	f, err := os.Open(p.out)
	if err != nil {
		return ProduceResult{}, err
	}
	defer func() { _ = f.Close() }()
	return ParseProduceResult(f)
}

// ParseProduceResult parses what a ShareTool produce-loop printed, wherever it ran.
func ParseProduceResult(out io.Reader) (ProduceResult, error) {
	var r ProduceResult
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "ACKED "):
			var pos Position
			if _, err := fmt.Sscanf(line, "ACKED %d %d", &pos.Partition, &pos.Offset); err == nil {
				r.Acked = append(r.Acked, pos)
			}
		case strings.HasPrefix(line, "FAILED "):
			r.Failures = append(r.Failures, line)
		case strings.HasPrefix(line, "SENT "):
			var longest, maxAck int64
			if _, err := fmt.Sscanf(line, "SENT %d ACKED %d FAILED %d LONGEST_FAILURE_MS %d MAX_ACK_MS %d",
				&r.Sent, &r.AckedCount, &r.Failed, &longest, &maxAck); err != nil {
				return r, fmt.Errorf("the producer's summary %q: %w", line, err)
			}
			r.Done = true
			r.LongestFailure, r.MaxAck = time.Duration(longest)*time.Millisecond, time.Duration(maxAck)*time.Millisecond
		}
	}
	return r, sc.Err()
}
