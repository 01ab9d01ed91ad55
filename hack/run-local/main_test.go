package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard()) // the test's own clients log nothing worth reading
	os.Exit(m.Run())
}

// TestRunLocal runs the system as `make run` does and uses it as the README's Quickstart does: a
// second run on the same data, the stand-in broker's state, its pod's deletion, and Ctrl-C.
func TestRunLocal(t *testing.T) {
	runDir := filepath.Join(t.TempDir(), ".run")
	first := startRunLocal(t, runDir)
	first.waitFor(t, "Press Ctrl-C", 5*time.Minute)
	kubeconfig := filepath.Join(runDir, "kubeconfig")

	t.Run("a second run on the same run directory fails at once, naming the first", func(t *testing.T) {
		want := fmt.Sprintf("already running (pid %d), data in %s", first.cmd.Process.Pid, runDir)
		for name, second := range map[string]func() *runLocal{
			"the same --run-dir":        func() *runLocal { return startRunLocal(t, runDir) },
			"KUBECONFIG of the first's": func() *runLocal { return startRunLocal(t, t.TempDir(), "KUBECONFIG="+kubeconfig) },
		} {
			r := second()
			switch err := r.exited(10 * time.Second); {
			case errors.Is(err, errStillRunning):
				t.Errorf("%s: still running after 10s, output:\n%s\nwant a failure at once saying %q", name, r.out.String(), want)
			case err == nil || !strings.Contains(r.out.String(), want):
				t.Errorf("%s: exit %v, output:\n%s\nwant a failure saying %q", name, err, r.out.String(), want)
			}
		}
	})

	cl := testenv.KubeClient(t, kubeconfig)
	ctx := context.Background()
	t.Run("the stand-in broker writes share state for the sample group", func(t *testing.T) {
		applySampleGroup(ctx, t, cl)
		states := eventuallyPartitions(t, cl, "written by the stand-in's leader, twice each", func(s sharestatev1.SharePartitionStateStatus) bool {
			return s.CreateTime != nil && s.Leader != nil && s.Leader.PodName == "local-broker-0" && s.WriteCount >= 2
		})
		if len(states) != 4 {
			t.Errorf("%d partitions have state, want the stand-in's 4", len(states))
		}
	})

	t.Run("deleting the stand-in broker's pod fences its partitions", func(t *testing.T) {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "local-broker-0"}}
		if err := cl.Delete(ctx, pod); err != nil {
			t.Fatal(err)
		}
		fenced := eventuallyPartitions(t, cl, "fenced, with the pod as the fenced leader", func(s sharestatev1.SharePartitionStateStatus) bool {
			return meta.IsStatusConditionTrue(s.Conditions, sharestatev1.ConditionFenced) && s.FencedLeader != nil && s.FencedLeader.PodName == "local-broker-0"
		})
		time.Sleep(2 * time.Second) // four of the stand-in's rounds, each refused
		for name, s := range eventuallyPartitions(t, cl, "still fenced", func(sharestatev1.SharePartitionStateStatus) bool { return true }) {
			if s.WriteCount != fenced[name].WriteCount || s.Leader != nil {
				t.Errorf("%s: the fenced leader wrote on: writes %d, then %d; leader %+v", name, fenced[name].WriteCount, s.WriteCount, s.Leader)
			}
		}
	})

	t.Run("Ctrl-C stops it and leaves no process", func(t *testing.T) {
		first.stopAndCheck(t, syscall.SIGINT, time.Minute)
	})
}

// TestASignalDuringTheStartStopsIt: a Ctrl-C or SIGTERM while the control plane starts stops run-local
// at once, in each phase of the start, and leaves none of the processes it had started.
func TestASignalDuringTheStartStopsIt(t *testing.T) {
	for _, tc := range []struct {
		phase string // the child process that has started when the signal comes
		sig   syscall.Signal
	}{
		{"etcd", syscall.SIGTERM},
		{"kube-apiserver", syscall.SIGINT},
	} {
		t.Run(tc.phase+" started, "+tc.sig.String(), func(t *testing.T) {
			r := startRunLocal(t, filepath.Join(t.TempDir(), ".run"))
			err := testenv.Poll(2*time.Minute, func() error {
				for _, name := range r.children() {
					if name == tc.phase {
						return nil
					}
				}
				if err := r.exited(0); !errors.Is(err, errStillRunning) {
					return fmt.Errorf("run-local ended (%w):\n%s", err, r.out.String())
				}
				return errors.New("not started yet")
			})
			if err != nil {
				t.Fatalf("%s did not start: %v", tc.phase, err)
			}
			// Long before the rest of the start could be done on these two cores (kube-apiserver alone
			// takes seconds to answer), and well after a start that honours the signal has stopped.
			r.stopAndCheck(t, tc.sig, 3*time.Second)
		})
	}
}

// applySampleGroup creates the ShareGroup of config/samples, as the Quickstart's kubectl apply does.
func applySampleGroup(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	group := &sharestatev1.ShareGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "orders"},
		Spec: sharestatev1.ShareGroupSpec{GroupID: "orders-processors", Topics: []sharestatev1.ShareGroupTopic{
			{TopicID: "q1Sh0o2QRbuBzMz8vEMbvQ", Name: "orders", Partitions: 12}}}}
	if err := cl.Create(ctx, group); err != nil {
		t.Fatal(err)
	}
}

// eventuallyPartitions waits until the sample group has SharePartitionStates and each one's status
// satisfies ok, and returns their statuses by name.
func eventuallyPartitions(t *testing.T, cl client.Client, what string, ok func(sharestatev1.SharePartitionStateStatus) bool) map[string]sharestatev1.SharePartitionStateStatus {
	t.Helper()
	var states map[string]sharestatev1.SharePartitionStateStatus
	err := testenv.Poll(2*time.Minute, func() error {
		var list sharestatev1.SharePartitionStateList
		if err := cl.List(context.Background(), &list, client.InNamespace("default"), client.MatchingLabels{sharestatev1.LabelShareGroup: "orders"}); err != nil {
			return err
		}
		states = map[string]sharestatev1.SharePartitionStateStatus{}
		for _, sps := range list.Items {
			if !ok(sps.Status) {
				return fmt.Errorf("partition %d is not %s: %+v", sps.Spec.Partition, what, sps.Status)
			}
			states[sps.Name] = sps.Status
		}
		if len(states) == 0 {
			return errors.New("no SharePartitionState yet")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the sample group's partitions: %v", err)
	}
	return states
}
