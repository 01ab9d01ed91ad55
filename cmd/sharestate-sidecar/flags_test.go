package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// readmeRow is one row of README.md's table of the sidecar's flags.
type readmeRow struct {
	flags []string // as written, without the dashes; a trailing * stands for every flag so prefixed
	def   string   // the default column, backticks removed
}

// readmeFlagTable reads the table under README.md's "## The sidecar".
func readmeFlagTable(t *testing.T) []readmeRow {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## The sidecar\n")
	if !ok {
		t.Fatal(`README.md has no "## The sidecar" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	flagName := regexp.MustCompile("`--([a-z0-9-]+\\*?)`")
	var rows []readmeRow
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if !strings.HasPrefix(line, "| `--") || len(cells) < 3 {
			continue
		}
		row := readmeRow{def: strings.TrimSpace(strings.ReplaceAll(cells[1], "`", ""))}
		for _, m := range flagName.FindAllStringSubmatch(cells[0], -1) {
			row.flags = append(row.flags, m[1])
		}
		rows = append(rows, row)
	}
	if len(rows) == 0 {
		t.Fatal("README.md's sidecar section has no table of flags")
	}
	return rows
}

// README.md's table of the sidecar's flags names every flag of the binary and no other, a required
// flag as required, and the defaults it gives for one flag are the binary's.
func TestReadmeFlagTable(t *testing.T) {
	fs := flag.NewFlagSet("sharestate-sidecar", flag.ContinueOnError)
	bindFlags(fs)
	var binary []string
	fs.VisitAll(func(f *flag.Flag) { binary = append(binary, f.Name) })
	if flag.CommandLine.Lookup("kubeconfig") == nil {
		t.Fatal("controller-runtime registered no --kubeconfig on the command line")
	}
	binary = append(binary, "kubeconfig") // controller-runtime's, on the command line main parses

	documented := map[string]bool{}
	for _, row := range readmeFlagTable(t) {
		for _, name := range row.flags {
			prefix, wildcard := strings.CutSuffix(name, "*")
			matched := slices.ContainsFunc(binary, func(b string) bool { return b == name || wildcard && strings.HasPrefix(b, prefix) })
			if !matched {
				t.Errorf("README.md documents --%s, which the sidecar does not have", name)
			}
			for _, b := range binary {
				if b == name || wildcard && strings.HasPrefix(b, prefix) {
					documented[b] = true
				}
			}
			if f := fs.Lookup(name); f != nil && strings.Contains(f.Usage, "(required)") && row.def != "required" {
				t.Errorf("README.md gives --%s, which is required, the default %q", name, row.def)
			}
		}
		if len(row.flags) == 1 {
			checkReadmeDefault(t, fs.Lookup(row.flags[0]), row.def)
		}
	}
	for _, b := range binary {
		if !documented[b] {
			t.Errorf("README.md's table of the sidecar's flags lacks --%s", b)
		}
	}
}

// checkReadmeDefault compares a flag's default in README.md with the binary's. A default the binary
// leaves empty (computed, or none) and one written for people ("8 MiB") are not compared.
func checkReadmeDefault(t *testing.T, f *flag.Flag, readme string) {
	t.Helper()
	if f == nil || f.DefValue == "" || strings.Contains(readme, " ") {
		return
	}
	if want, err := time.ParseDuration(f.DefValue); err == nil {
		if got, err := time.ParseDuration(readme); err != nil || got != want {
			t.Errorf("README.md gives --%s the default %q, the binary %s", f.Name, readme, f.DefValue)
		}
		return
	}
	if readme != f.DefValue {
		t.Errorf("README.md gives --%s the default %q, the binary %q", f.Name, readme, f.DefValue)
	}
}
