package kafkacluster

import (
	"fmt"
	"path/filepath"
	"time"
)

// ConsumerOptions shape a ShareTool share consumer.
type ConsumerOptions struct {
	// ReleaseEvery releases the first delivery of every offset that is a multiple of it (0: none).
	ReleaseEvery int
	// Idle stops the consumer after this long without records.
	Idle time.Duration
	// AckDelay holds what each poll gave this long before acknowledging it: records stay in flight
	// (acquired) at their leader meanwhile.
	AckDelay time.Duration
	// CommitTimeout bounds each commit of acknowledgements (default 30 s).
	CommitTimeout time.Duration
}

// StartConsumerWith starts a share consumer of group on topic, shaped by o.
func (c Clients) StartConsumerWith(name, topic, group string, o ConsumerOptions) (*Consumer, error) {
	if o.CommitTimeout == 0 {
		o.CommitTimeout = 30 * time.Second
	}
	con := &Consumer{Name: name, out: filepath.Join(c.Dir, name+".out"),
		proc: process{name: name, logPath: filepath.Join(c.Dir, name+".log")}}
	err := c.startShareTool(&con.proc, con.out, "consume", c.Bootstrap, topic, group, fmt.Sprint(o.ReleaseEvery),
		fmt.Sprint(o.Idle.Milliseconds()), fmt.Sprint(o.AckDelay.Milliseconds()), fmt.Sprint(o.CommitTimeout.Milliseconds()))
	if err != nil {
		return nil, err
	}
	return con, nil
}
