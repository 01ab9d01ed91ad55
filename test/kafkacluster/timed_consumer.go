package kafkacluster

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// TimedConsumer is a running ShareTool timed-consume: a share consumer with implicit
// acknowledgement that writes down when each record reached it.
type TimedConsumer struct {
	Name string
	out  string
	proc process
}

// StartTimedConsumer starts a timed share consumer of group on topic.
func (c Clients) StartTimedConsumer(name, topic, group string) (*TimedConsumer, error) {
	con := &TimedConsumer{Name: name, out: filepath.Join(c.Dir, name+".out"),
		proc: process{name: name, logPath: filepath.Join(c.Dir, name+".log")}}
	if err := c.startShareTool(&con.proc, con.out, "timed-consume", c.Bootstrap, topic, group); err != nil {
		return nil, err
	}
	return con, nil
}

// Stop closes the consumer (SIGTERM), or kills it after 30 s.
func (con *TimedConsumer) Stop() { con.proc.stop(30 * time.Second) }

// FirstDelivery is when the consumer first received a record of partition at or after since, and
// whether it has.
func (con *TimedConsumer) FirstDelivery(partition int32, since time.Time) (time.Time, bool) {
	f, err := os.Open(con.out)
	if err != nil {
		return time.Time{}, false
	}
	defer func() { _ = f.Close() }()
	sinceMs := since.UnixMilli()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		// "millis partition offset deliveryCount"
		fields := strings.Fields(scanner.Text())
		if len(fields) != 4 || fields[1] != strconv.Itoa(int(partition)) {
			continue
		}
		ms, err := strconv.ParseInt(fields[0], 10, 64)
		if err == nil && ms >= sinceMs {
			return time.UnixMilli(ms), true
		}
	}
	return time.Time{}, false
}

// Kill ends the consumer at once.
func (con *TimedConsumer) Kill() { con.proc.kill() }

// DeliverySummary is what a timed consumer received: how many records, and when the first and the
// last reached it.
type DeliverySummary struct {
	Records     int
	First, Last time.Time
}

// Summary reads what the consumer received so far.
func (con *TimedConsumer) Summary() DeliverySummary {
	var s DeliverySummary
	f, err := os.Open(con.out)
	if err != nil {
		return s
	}
	defer func() { _ = f.Close() }()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) != 4 {
			continue
		}
		ms, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		at := time.UnixMilli(ms)
		if s.Records == 0 || at.Before(s.First) {
			s.First = at
		}
		if at.After(s.Last) {
			s.Last = at
		}
		s.Records++
	}
	return s
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
