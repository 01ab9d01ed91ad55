package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharestate/sharestate-operator/test/localcluster"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// TestAnnouncedCommandsAreTheReadmes: every command `make run` prints to try is one the README's
// Quickstart gives, so a newcomer reading either is told the same (make run printed a plugin recipe
// with bin/ on PATH while the README built it into ~/bin, which no PATH holds by default).
func TestAnnouncedCommandsAreTheReadmes(t *testing.T) {
	cfg, _ := parseFlags(nil) // make run's defaults
	clone := filepath.Join(t.TempDir(), "sharestate-operator")
	cluster := &localcluster.Cluster{Local: true, KubeconfigPath: filepath.Join(clone, ".run", "kubeconfig")}
	var out bytes.Buffer
	announce(&out, cluster, cfg)

	announced := triedCommands(t, out.String())
	if len(announced) < 4 {
		t.Fatalf("make run prints %d commands to try, want the Quickstart's:\n%s", len(announced), out.String())
	}
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := readmeCommands(string(readme))
	for _, command := range announced {
		// The README names the kubeconfig from the clone's directory, make run by its path.
		command = strings.ReplaceAll(command, clone, "$PWD")
		if !slices.Contains(documented, command) {
			t.Errorf("make run prints %q, which the README does not give (in a code block or inline)", command)
		}
	}
}

// triedCommands returns the commands between announce's "Try" line and "Press Ctrl-C", each without
// its comment.
func triedCommands(t *testing.T, out string) []string {
	t.Helper()
	_, tries, ok := strings.Cut(out, "Try, in another shell")
	if !ok {
		t.Fatalf("make run prints nothing to try:\n%s", out)
	}
	tries, _, _ = strings.Cut(tries, "Press Ctrl-C")
	var commands []string
	for _, line := range strings.Split(tries, "\n")[1:] {
		if command := withoutComment(line); command != "" {
			commands = append(commands, command)
		}
	}
	return commands
}

// readmeCommands returns the lines of the page's fenced code blocks, each without its comment, and
// its inline code spans.
func readmeCommands(page string) []string {
	var commands []string
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			commands = append(commands, withoutComment(line))
			continue
		}
		spans := strings.Split(line, "`")
		for i := 1; i < len(spans); i += 2 {
			commands = append(commands, strings.TrimSpace(spans[i]))
		}
	}
	return commands
}

func withoutComment(line string) string {
	command, _, _ := strings.Cut(line, "#")
	return strings.Join(strings.Fields(command), " ")
}
