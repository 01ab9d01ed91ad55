//go:build unix

package localcluster

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// TakeTerminal makes Ctrl-C reach this process alone. A terminal sends SIGINT to its whole foreground
// process group, and under `make run` (or `make run-kafka`) that group holds make too: make then dies of the signal (exit
// status 130) however cleanly this process stops. So when standard input is the terminal and our group
// is its foreground, we move into a process group of our own and make that the foreground, as a shell
// does for a job; the returned function gives the terminal back to the group we came from. The control
// plane's processes already run in process groups of their own (envtest starts them so), and stop when
// we stop them. Anywhere else (no terminal, or run in the background) it does nothing.
func TakeTerminal() (giveBack func()) {
	fd := int(os.Stdin.Fd())
	foreground, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP)
	if err != nil || foreground != unix.Getpgrp() {
		return func() {}
	}
	if err := unix.Setpgid(0, 0); err != nil {
		return func() {}
	}
	// Setting the foreground from a background group raises SIGTTOU, which would stop us.
	signal.Ignore(unix.SIGTTOU)
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, unix.Getpgrp()); err != nil {
		_ = unix.Setpgid(0, foreground)
		return func() {}
	}
	return func() { _ = unix.IoctlSetPointerInt(fd, unix.TIOCSPGRP, foreground) }
}
