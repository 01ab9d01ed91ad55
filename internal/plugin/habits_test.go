package plugin

import (
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// The help shows no default that misleads: none on a required flag (dump's --partition showed
// "(default -1)"), none repeated after a usage that gives it (--partitions showed "(default [])").
func TestHelpShowsNoMisleadingDefaults(t *testing.T) {
	for _, tc := range []struct {
		command, flag string
	}{{"dump", "--partition "}, {"reset-offsets", "--partitions "}, {"reset-offsets", "--topic "}} {
		streams, _, out, _ := genericiooptions.NewTestIOStreams()
		cmd := NewCommand(genericclioptions.NewConfigFlags(false), streams)
		cmd.SetArgs([]string{tc.command, "--help"})
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		line := ""
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.Contains(l, tc.flag) {
				line = l
			}
		}
		if line == "" || strings.Contains(line, "(default -1)") || strings.Contains(line, "(default [])") ||
			strings.Count(line, "default") > 1 {
			t.Errorf("%s --help: the line of %s is %q", tc.command, tc.flag, line)
		}
	}
}

func TestDumpPartitionIsRequired(t *testing.T) {
	do := &dumpOptions{topic: "orders", out: newOutputFlags()}
	if err := do.validate(false); err == nil || err.Error() != "--partition is required" {
		t.Errorf("no --partition: %v", err)
	}
	if err := do.validate(true); err != nil {
		t.Errorf("--partition 0: %v", err)
	}
	do.partition = -1
	if err := do.validate(true); err == nil || err.Error() != "--partition -1 is negative" {
		t.Errorf("--partition -1: %v", err)
	}
}

// --dry-run takes kubectl's values, and the booleans pflag's boolean flags take.
func TestDryRunValues(t *testing.T) {
	for in, want := range map[string]dryRun{"client": dryRunClient, "server": dryRunServer, "none": dryRunNone, "true": dryRunClient, "false": dryRunNone} {
		var d dryRun
		if err := d.Set(in); err != nil || d != want {
			t.Errorf("--dry-run=%s: %q, %v; want %q", in, d, err, want)
		}
	}
	var d dryRun
	if err := d.Set("Client"); err == nil || err.Error() != "want none, client or server" {
		t.Errorf("--dry-run=Client: %v", err)
	}
	if d.on() || dryRunNone.on() || !dryRunClient.on() || !dryRunServer.on() {
		t.Error("on() is wrong")
	}
}
