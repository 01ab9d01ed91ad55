//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package localcluster

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// lockHelperEnv makes the test binary a process that holds a run directory's lock (TestHoldLockHelper).
const lockHelperEnv = "LOCALCLUSTER_HOLD_LOCK"

// TestHoldLockHelper is not a test: run with lockHelperEnv set, it is the other process of the lock
// tests. It takes the lock of the directory the variable names, says so, and waits to be killed.
func TestHoldLockHelper(t *testing.T) {
	dir := os.Getenv(lockHelperEnv)
	if dir == "" {
		t.Skip("the helper process of TestALockOfAKilledProcessIsTakenOver")
	}
	if _, err := lockRunDir(dir); err != nil {
		t.Fatal(err)
	}
	fmt.Println("locked")
	time.Sleep(time.Minute)
}

// holdLockInAnotherProcess starts a process that holds dir's lock, and returns it once it does.
func holdLockInAnotherProcess(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldLockHelper$")
	cmd.Env = append(os.Environ(), lockHelperEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		t.Fatalf("the helper did not take the lock: %q, %v", line, err)
	}
	return cmd
}

func TestASecondRunIsToldWhoRuns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".run") // not there yet: the lock creates it
	holder := holdLockInAnotherProcess(t, dir)
	_, err := lockRunDir(dir)
	var running *AlreadyRunningError
	if !errors.As(err, &running) || running.PID != holder.Process.Pid || running.RunDir != dir {
		t.Fatalf("lockRunDir of a held directory = %v; want already running (pid %d) in %s", err, holder.Process.Pid, dir)
	}
	want := "already running (pid " + strconv.Itoa(holder.Process.Pid) + "), data in " + dir
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestALockOfAKilledProcessIsTakenOver(t *testing.T) {
	dir := t.TempDir()
	holder := holdLockInAnotherProcess(t, dir)
	if err := holder.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	lock, err := lockRunDir(dir)
	if err != nil {
		t.Fatalf("the lock of a killed process was not taken over: %v", err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, lockFile))
	if got := strings.TrimSpace(string(data)); got != strconv.Itoa(os.Getpid()) {
		t.Errorf("the lock file holds %q, want this process's pid %d", got, os.Getpid())
	}
	// Released, it is free again, in this process as in any other.
	lock.release()
	again, err := lockRunDir(dir)
	if err != nil {
		t.Fatalf("a released lock could not be taken again: %v", err)
	}
	again.release()
}

// TestAFreshStartLeavesAHeldDirectoryAlone: a start that empties its run directory (run-kafka's)
// fails on a directory another process holds, and deletes none of its data.
func TestAFreshStartLeavesAHeldDirectoryAlone(t *testing.T) {
	dir := filepath.Join(t.TempDir(), ".run-kafka")
	holdLockInAnotherProcess(t, dir)
	data := filepath.Join(dir, "etcd")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := StartContext(t.Context(), Options{RunDir: dir, Fresh: true})
	if _, ok := errors.AsType[*AlreadyRunningError](err); !ok {
		t.Fatalf("a fresh start on a held directory = %v; want already running", err)
	}
	if _, err := os.Stat(data); err != nil {
		t.Fatalf("the holder's data went: %v", err)
	}
}

// TestAFreshStartEmptiesItsDirectory: once the lock is held, everything but the lock goes.
func TestAFreshStartEmptiesItsDirectory(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kafka-0"} {
		if err := os.MkdirAll(filepath.Join(dir, name, "data"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lock, err := lockRunDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.release()
	if err := emptyExceptLock(dir); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != lockFile {
		t.Fatalf("left %v, want only the lock", entries)
	}
}
