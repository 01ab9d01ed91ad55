package localcluster

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// A process that uses a run directory holds a lock on a file in it, so that a second `make run` on
// the same directory fails at once, naming the first, instead of starting a second etcd on the same
// data (which waits for the first one's lock on its database and fails after minutes) or a second
// operator on the same ports. The lock is the kernel's (flock): it goes with the process however the
// process ends, so the lock of a process that was killed is taken over by the next one without a
// question. The file holds the holder's pid for the message; it stays after its holder ends, since
// removing a file another process may have just opened would give two processes a lock each.
const lockFile = "lock"

// AlreadyRunningError says that another process holds the run directory.
type AlreadyRunningError struct {
	// PID is the holder's process id; 0 when it has not written it yet.
	PID int
	// RunDir is the directory it holds.
	RunDir string
}

func (e *AlreadyRunningError) Error() string {
	who := "pid unknown"
	if e.PID > 0 {
		who = "pid " + strconv.Itoa(e.PID)
	}
	return fmt.Sprintf("already running (%s), data in %s", who, e.RunDir)
}

// runLock is a held run directory; release gives it up.
type runLock struct {
	f *os.File
}

// release gives the run directory up (closing the file drops the lock).
func (l *runLock) release() {
	if l != nil {
		_ = l.f.Close()
	}
}

// holderPID reads the pid the lock's holder wrote. The holder writes it just after it takes the lock,
// so a read that finds nothing tries again briefly.
func holderPID(path string) int {
	for range 10 {
		data, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(string(bytes.TrimSpace(data))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0
}
