package kafkacluster

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// TimedConsumer is a running ShareTool timed-consume: a share consumer with implicit
// acknowledgement that writes down when each record reached it.
type TimedConsumer struct {
	Name string
	out  string
	proc process

	// What was read of out so far: a bench polls while the consumer runs, so each look reads only
	// what was appended since the last one (rereading hundreds of thousands of lines every poll
	// would take CPU from the very consumption being timed).
	mu      sync.Mutex
	offset  int64
	summary DeliverySummary
	arrived map[int32][]time.Time // by partition, in the order the consumer received them
}

// StartTimedConsumer starts a timed share consumer of group on topic.
func (c Clients) StartTimedConsumer(name, topic, group string) (*TimedConsumer, error) {
	con := &TimedConsumer{Name: name, out: filepath.Join(c.Dir, name+".out"),
		proc: process{name: name, logPath: filepath.Join(c.Dir, name+".log")}, arrived: map[int32][]time.Time{}}
	if err := c.startShareTool(&con.proc, con.out, "timed-consume", c.Bootstrap, topic, group); err != nil {
		return nil, err
	}
	return con, nil
}

// Stop closes the consumer (SIGTERM), or kills it after 30 s.
func (con *TimedConsumer) Stop() { con.proc.stop(30 * time.Second) }

// PID is the consumer's process id, 0 when it does not run.
func (con *TimedConsumer) PID() int { return con.proc.pid() }

// Kill ends the consumer at once.
func (con *TimedConsumer) Kill() { con.proc.kill() }

// FirstDelivery is when the consumer first received a record of partition at or after since, and
// whether it has.
func (con *TimedConsumer) FirstDelivery(partition int32, since time.Time) (time.Time, bool) {
	con.mu.Lock()
	defer con.mu.Unlock()
	con.readNew()
	arrived := con.arrived[partition]
	i, _ := slices.BinarySearchFunc(arrived, since, func(at, t time.Time) int { return at.Compare(t) })
	if i == len(arrived) {
		return time.Time{}, false
	}
	return arrived[i], true
}

// Summary reads what the consumer received so far.
func (con *TimedConsumer) Summary() DeliverySummary {
	con.mu.Lock()
	defer con.mu.Unlock()
	con.readNew()
	return con.summary
}

// readNew takes in the whole lines appended to out since the last look.
func (con *TimedConsumer) readNew() {
	f, err := os.Open(con.out)
	if err != nil {
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(con.offset, io.SeekStart); err != nil {
		return
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return
	}
	// A line still being written is left for the next look.
	end := bytes.LastIndexByte(data, '\n') + 1
	for line := range strings.Lines(string(data[:end])) {
		con.take(line)
	}
	con.offset += int64(end)
}

// take records one line, "millis partition offset deliveryCount"; others (errors) are skipped.
func (con *TimedConsumer) take(line string) {
	fields := strings.Fields(line)
	if len(fields) != 4 {
		return
	}
	ms, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return
	}
	partition, err := strconv.ParseInt(fields[1], 10, 32)
	if err != nil {
		return
	}
	at := time.UnixMilli(ms)
	con.arrived[int32(partition)] = append(con.arrived[int32(partition)], at)
	con.summary = con.summary.Merge(DeliverySummary{Records: 1, First: at, Last: at})
}

// DeliverySummary is what a timed consumer received: how many records, and when the first and the
// last reached it.
type DeliverySummary struct {
	Records     int
	First, Last time.Time
}

// Merge is the summary of both consumers' deliveries.
func (s DeliverySummary) Merge(o DeliverySummary) DeliverySummary {
	switch {
	case o.Records == 0:
		return s
	case s.Records == 0:
		return o
	}
	out := DeliverySummary{Records: s.Records + o.Records, First: s.First, Last: s.Last}
	if o.First.Before(out.First) {
		out.First = o.First
	}
	if o.Last.After(out.Last) {
		out.Last = o.Last
	}
	return out
}
