package plugin

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
)

type deleteOptions struct {
	yes     bool
	wait    bool
	timeout time.Duration
	poll    time.Duration
}

func newDeleteCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delete",
		Short: "Delete a share group and its state",
	}
	cmd.AddCommand(newDeleteGroupCommand(o))
	requireKind(cmd)
	return cmd
}

func newDeleteGroupCommand(o *rootOptions) *cobra.Command {
	do := &deleteOptions{poll: 250 * time.Millisecond}
	cmd := &cobra.Command{
		Use:     "group NAME|GROUP_ID",
		Aliases: []string{"sharegroup", "sg"},
		Short:   "Delete a ShareGroup; the operator then deletes the state of all its partitions",
		Long: `Delete a ShareGroup. The operator then deletes the SharePartitionState of every partition of the
group: the group's consumption progress is gone, and the next consumer starts afresh.

The command asks for the group id on stdin to confirm, and refuses without that answer; --yes skips
the question.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if do.timeout <= 0 {
				return fmt.Errorf("--timeout %s must be above zero", do.timeout)
			}
			s, err := o.connect()
			if err != nil {
				return err
			}
			return do.run(cmd.Context(), s, o.streams.In, args[0])
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&do.yes, "yes", "y", false, "delete without asking for confirmation")
	f.BoolVar(&do.wait, "wait", true, "wait until the operator has deleted the group's partition state and the group is gone")
	f.DurationVar(&do.timeout, "timeout", time.Minute, "how long to wait with --wait")
	return cmd
}

func (do *deleteOptions) run(ctx context.Context, s *session, in io.Reader, groupArg string) error {
	sg, err := s.findGroup(ctx, groupArg, false)
	if err != nil {
		return err
	}
	partitions, err := s.listPartitions(ctx, sg)
	if err != nil {
		return err
	}
	p := &printer{w: s.out}
	p.printf("ShareGroup %s/%s (group id %q) will be deleted, and with it the state of its %s: their consumption progress is lost.\n",
		sg.Namespace, sg.Name, sg.Spec.GroupID, counted(len(partitions), "partition"))
	if !do.yes {
		p.printf("Type the group id to confirm: ")
		if p.err != nil {
			return p.err
		}
		if err := confirm(in, string(sg.Spec.GroupID)); err != nil {
			return err
		}
	}
	err = s.client.Delete(ctx, sg, client.Preconditions{UID: &sg.UID})
	switch {
	case apierrors.IsNotFound(err):
		p.printf("ShareGroup %s/%s is already gone.\n", sg.Namespace, sg.Name)
		return p.err
	case err != nil:
		return apiError(err, "deleting ShareGroup %s/%s", sg.Namespace, sg.Name)
	}
	p.printf("sharegroup %s/%s deleted\n", sg.Namespace, sg.Name)
	if !do.wait || p.err != nil {
		return p.err
	}
	if err := s.waitGone(ctx, sg, do.timeout, do.poll); err != nil {
		return err
	}
	p.printf("The operator deleted the state of its %s.\n", counted(len(partitions), "partition"))
	return p.err
}

// confirm reads one answer from in and accepts it only if it is the group id. No answer at all (in
// closed or empty, as when nobody is at a terminal) is a refusal.
func confirm(in io.Reader, groupID string) error {
	if in == nil {
		return errors.New("no confirmation: no input to read it from; pass --yes to delete without asking")
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("reading the confirmation: %w", err)
	}
	answer := strings.TrimRight(line, "\r\n")
	if answer == "" && errors.Is(err, io.EOF) {
		return errors.New("no confirmation: stdin ended without an answer; nothing was deleted (pass --yes to delete without asking)")
	}
	if answer != groupID {
		return fmt.Errorf("confirmation %q is not the group id %q; nothing was deleted", answer, groupID)
	}
	return nil
}

// waitGone polls until the group is gone: the operator's finalizer holds it until its partition state
// is deleted.
func (s *session) waitGone(ctx context.Context, sg *sharestatev1.ShareGroup, timeout, poll time.Duration) error {
	key := client.ObjectKeyFromObject(sg)
	err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(ctx context.Context) (bool, error) {
		current := &sharestatev1.ShareGroup{}
		err := s.client.Get(ctx, key, current)
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, apiError(err, "reading ShareGroup %s", key)
		}
		return current.UID != sg.UID, nil // another UID: gone, and a new group of the same name created since
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("waiting for ShareGroup %s to go: %w", key, ctx.Err())
	case !wait.Interrupted(err):
		return err
	}
	left, err := s.listPartitions(ctx, sg)
	if err != nil {
		return fmt.Errorf("ShareGroup %s is still being deleted after %s: %w", key, timeout, err)
	}
	return fmt.Errorf("ShareGroup %s is still being deleted after %s: %s left, and its finalizer %s waits for the operator to delete them (is it running?)",
		key, timeout, counted(len(left), "partition state"), sharestatev1.FinalizerPartitionState)
}
