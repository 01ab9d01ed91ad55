//go:build e2e

package e2e

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sharestate/sharestate-operator/test/testenv"
)

// This file holds what TestDocumentedCommands needs to run the documentation as a newcomer would: a copy
// of the working tree standing for a fresh clone, the fenced shell blocks a page marks with
// `<!-- docs-test: NAME -->`, one shell whose exported variables carry from block to block, and
// `make run` in the background, stopped with the Ctrl-C a terminal sends.

// copyWorkingTree copies what a clone of the repository holds (the tracked files, and new ones not
// ignored, so that uncommitted work is tested too) into a fresh directory, and returns it.
func copyWorkingTree(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("listing the repository's files: %v", err)
	}
	clone := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if err := copyFile(filepath.Join(root, name), filepath.Join(clone, name)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue // deleted in the working tree, not yet in the index
			}
			t.Fatal(err)
		}
	}
	return clone
}

func copyFile(from, to string) error {
	info, err := os.Stat(from)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, info.Mode().Perm())
}

// docBlock returns the fenced code block that follows the line `<!-- docs-test: name -->` in a page.
func docBlock(t *testing.T, page, name string) string {
	t.Helper()
	block, err := testenv.DocBlock(page, name)
	if err != nil {
		t.Fatal(err)
	}
	return block
}

// shell runs blocks in the clone as bash scripts, one after another, carrying the environment each
// leaves (its exports) into the next, as one terminal would.
type shell struct {
	t   *testing.T
	dir string
	env []string
}

// run runs a block and fails the test, with the block's output, when a command of it fails.
func (s *shell) run(block string) string {
	s.t.Helper()
	out, err := s.try(block)
	if err != nil {
		s.t.Fatalf("the documented commands\n%s\nfailed: %v\n%s", block, err, out)
	}
	return out
}

// try runs a block and returns its output and error.
func (s *shell) try(block string) (string, error) {
	envFile := filepath.Join(s.t.TempDir(), "env")
	script := "set -euo pipefail\n" + block + "\nenv -0 > " + envFile + "\n"
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir, cmd.Env = s.dir, s.env
	out, err := cmd.CombinedOutput()
	s.t.Logf("$ %s\n%s", strings.ReplaceAll(block, "\n", "\n$ "), out)
	if err != nil {
		return string(out), err
	}
	data, err := os.ReadFile(envFile)
	if err != nil {
		return string(out), err
	}
	s.env = strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
	return string(out), nil
}

// getenv returns a variable of the shell's environment.
func (s *shell) getenv(name string) string {
	for _, kv := range s.env {
		if k, v, _ := strings.Cut(kv, "="); k == name {
			return v
		}
	}
	return ""
}

// background is a long-running command (`make run`) started the way a terminal's shell runs a job in
// the foreground: in a session whose controlling terminal is a pseudo-terminal, where the test presses
// Ctrl-C as a person would, and the terminal decides whom the interrupt reaches.
type background struct {
	cmd      *exec.Cmd
	terminal *os.File // the pseudo-terminal's controlling side
	out      *testenv.SyncBuffer
	done     chan error
}

// startBackground starts a command in the shell's directory and environment and waits until its
// output holds ready.
func (s *shell) startBackground(command, ready string, timeout time.Duration) *background {
	s.t.Helper()
	terminal, tty, err := openPseudoTerminal()
	if err != nil {
		s.t.Fatalf("a pseudo-terminal: %v", err)
	}
	s.t.Cleanup(func() { _ = terminal.Close() })
	defer func() { _ = tty.Close() }() // the command holds its own copy
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.Stdin = tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	b := &background{cmd: cmd, terminal: terminal, out: &testenv.SyncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = b.out, b.out
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, terminal) }() // the terminal's echo of what we type
	go func() { b.done <- cmd.Wait() }()
	s.t.Cleanup(func() { b.kill() })
	deadline := time.After(timeout)
	for !strings.Contains(b.out.String(), ready) {
		select {
		case err := <-b.done:
			s.t.Fatalf("%s ended before it was ready (%v):\n%s", command, err, b.out.String())
		case <-deadline:
			s.t.Fatalf("%s not ready after %s:\n%s", command, timeout, b.out.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return b
}

// interrupt presses Ctrl-C on the command's terminal and returns the command's exit error (nil for
// exit status 0).
func (b *background) interrupt(timeout time.Duration) error {
	if _, err := b.terminal.Write([]byte{0x03}); err != nil {
		return err
	}
	select {
	case err := <-b.done:
		b.done <- err // kill finds it ended
		return err
	case <-time.After(timeout):
		return fmt.Errorf("still running %s after Ctrl-C", timeout)
	}
}

// kill ends the command if it still runs (a test that failed half-way): first as a person would, with
// Ctrl-C, so that make run stops the control plane it started (its processes run in process groups of
// their own, which a kill of this one would leave behind), then with SIGKILL.
func (b *background) kill() {
	select {
	case err := <-b.done:
		b.done <- err
		return
	default:
	}
	if b.interrupt(time.Minute) == nil {
		return
	}
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case err := <-b.done:
		b.done <- err
	case <-time.After(10 * time.Second):
	}
}

// openPseudoTerminal opens a new pseudo-terminal: the side a terminal emulator holds, and the terminal
// a command reads from.
func openPseudoTerminal() (terminal, tty *os.File, err error) {
	terminal, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(terminal.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil { // unlockpt
		_ = terminal.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN) // ptsname
	if err != nil {
		_ = terminal.Close()
		return nil, nil, err
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		_ = terminal.Close()
		return nil, nil, err
	}
	return terminal, tty, nil
}
