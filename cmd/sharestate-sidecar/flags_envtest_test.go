package main_test

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// The binary refuses invalid flags before it does anything else: exit status 2, one line per problem.
func TestInvalidFlagsFailAtStart(t *testing.T) {
	out, err := exec.Command(sidecarBinary(t), "--namespace=kafka", "--broker-id=1", "--pod-name=kafka-1",
		"--max-pending-writes=0", "--request-timeout=-5s").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "--max-pending-writes=0") || !strings.Contains(lines[2], "--request-timeout=-5s") {
		t.Fatalf("output:\n%s\nwant a heading and one line per invalid flag", out)
	}
}
