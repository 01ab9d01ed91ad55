//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package localcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// lockRunDir creates dir if it does not exist and takes its lock, or returns an *AlreadyRunningError
// naming the process that holds it.
func lockRunDir(dir string) (*runLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	// Go opens files close-on-exec: the control plane's processes do not inherit the lock, so it ends
	// with this process, not with an etcd that outlives it.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, &AlreadyRunningError{PID: holderPID(path), RunDir: dir}
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := writePID(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return &runLock{f: f}, nil
}

func writePID(f *os.File) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return err
}
