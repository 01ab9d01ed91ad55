package plugin

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

// dryRun is reset-offsets' --dry-run. Kafka's kafka-share-groups.sh takes it bare, kubectl as
// --dry-run=none|client|server: both are understood, bare meaning client.
type dryRun string

const (
	// dryRunNone is no dry run: the command needs --execute.
	dryRunNone dryRun = "none"
	// dryRunClient shows the plan, worked out here, and sends nothing.
	dryRunClient dryRun = "client"
	// dryRunServer shows the plan, and has the API server check the request (schema, admission) as
	// it would store it, without storing it.
	dryRunServer dryRun = "server"
)

// on reports whether a dry run is asked for (the zero value is none).
func (d dryRun) on() bool { return d == dryRunClient || d == dryRunServer }

func (d *dryRun) String() string { return string(*d) }

// Type names the value in the help: "--dry-run mode[=client]" reads better than pflag's "string".
func (d *dryRun) Type() string { return "mode" }

// Set takes kubectl's values, and a boolean as pflag's boolean flags do (true is client), as kubectl
// still does.
func (d *dryRun) Set(v string) error {
	switch v {
	case "none", "false":
		*d = dryRunNone
	case "client", "true":
		*d = dryRunClient
	case "server":
		*d = dryRunServer
	default:
		return fmt.Errorf("want none, client or server")
	}
	return nil
}

// latestReset checks that clearing the start offset, which --to-latest does, starts the group's
// partitions at the log end, and says on what authority. The plugin cannot read the log end offsets
// that Kafka's kafka-share-groups.sh --to-latest resets to (it asks the brokers): a cleared start
// offset has the partition's leader apply share.auto.offset.reset when it next reads the state, which
// the reset's new state epoch makes it do before it writes again. So the log end is taken when the
// leader reads, not when the reset is made as Kafka's tool takes it, and it is the log end only if the
// group's share.auto.offset.reset is latest: what spec.settings.autoOffsetReset declares, or Kafka's
// default when it declares nothing.
func latestReset(sg *sharestatev1.ShareGroup) (note string, err error) {
	var declared sharestatev1.AutoOffsetReset
	if sg.Spec.Settings != nil {
		declared = sg.Spec.Settings.AutoOffsetReset
	}
	switch declared {
	case "":
		return "share.auto.offset.reset is latest by Kafka's default, as the group declares no other in " +
			"spec.settings.autoOffsetReset (if the brokers' group config sets another, declare it there)", nil
	case sharestatev1.AutoOffsetResetLatest:
		return "share.auto.offset.reset is latest, as the group's spec.settings.autoOffsetReset declares", nil
	}
	return "", fmt.Errorf("--to-latest clears the start offset, and each leader then applies share.auto.offset.reset, which "+
		"group %q declares as %q in spec.settings.autoOffsetReset, not latest: the plugin cannot read the log end offsets "+
		"itself; reset --to-offset N, or declare latest (as the brokers' group config has it)", sg.Spec.GroupID, declared)
}

// printLatestNote says, under the plan, what --to-latest's cleared start offset becomes.
func (s *session) printLatestNote(note string) error {
	_, err := fmt.Fprintf(s.out, "With --to-latest the start offset is cleared (-1): each leader starts from the log end when it "+
		"next reads its partition; %s.\n", note)
	return err
}

// serverDryRun sends the request as --execute would write it, with dryRun=All: the API server checks
// it (schema, admission) and stores nothing. A request already written or carried out is not sent.
func (s *session) serverDryRun(ctx context.Context, sg *sharestatev1.ShareGroup, req sharestatev1.OffsetResetRequest, action submitAction) error {
	if action != submitWrite {
		return nil
	}
	patch := client.MergeFromWithOptions(sg.DeepCopy(), client.MergeFromWithOptimisticLock{})
	written := sg.DeepCopy()
	written.Spec.OffsetReset = req.DeepCopy()
	if err := s.client.Patch(ctx, written, patch, client.DryRunAll); err != nil {
		return apiError(err, "the API server refused reset %q (a server dry run, nothing was stored)", req.ID)
	}
	_, err := fmt.Fprintf(s.out, "The API server accepted reset %q (a server dry run: checked, not stored).\n", req.ID)
	return err
}
