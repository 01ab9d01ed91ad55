package testenv

import (
	"bytes"
	"errors"
	"io"
	"sync"
	"time"
)

// StampedWriter writes each line it is given to its destination after the wall-clock time the line
// began to arrive (15:04:05.000). A process's garbage collection traces (GODEBUG=gctrace=1) carry only
// the time since that process started, and the operator's and sidecars' log lines are stamped to the
// second: stamped, the lines of every process the bench runs stand on one clock beside its slow
// writes.
type StampedWriter struct {
	mu      sync.Mutex
	dst     io.Writer
	line    []byte // the line begun and not ended yet, its stamp included
	pending bool   // line holds a line begun
	now     func() time.Time
}

// NewStampedWriter returns a StampedWriter to dst.
func NewStampedWriter(dst io.Writer) *StampedWriter {
	return &StampedWriter{dst: dst, now: time.Now}
}

// stampLayout is the stamp before each line: the time of day to the millisecond.
const stampLayout = "15:04:05.000 "

func (s *StampedWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if !s.pending {
			s.line, s.pending = s.now().AppendFormat(s.line[:0], stampLayout), true
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.line = append(s.line, p...)
			return n, nil
		}
		s.line = append(s.line, p[:i+1]...)
		p = p[i+1:]
		s.pending = false
		if _, err := s.dst.Write(s.line); err != nil {
			return n - len(p), err
		}
	}
	return n, nil
}

// Close writes the line begun, if any, ended with a newline, then closes the destination if it is
// an io.Closer.
func (s *StampedWriter) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.pending {
		s.pending = false
		_, err = s.dst.Write(append(s.line, '\n'))
	}
	if c, ok := s.dst.(io.Closer); ok {
		err = errors.Join(err, c.Close())
	}
	return err
}
