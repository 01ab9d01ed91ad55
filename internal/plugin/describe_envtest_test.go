package plugin_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// A group of three partitions: 0 led by a live broker with records in flight, 1 fenced after its
// broker's pod was deleted, 2 initialized and never read. describe shows them, found by object name,
// by Kafka group id, and by group id in any namespace.
func TestDescribeGroup(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	const group = "Describe.Orders" // not a valid object name: only a group id
	sg := declareGroup(t, ns, group, 3)
	b1 := newBroker(t, ns, group, 1, brokerPod(t, ns, "broker-1"))
	pod2 := brokerPod(t, ns, "broker-2")
	b2 := newBroker(t, ns, group, 2, pod2)
	for part := range int32(3) {
		b1.initialize(part, 0, 0)
	}
	// The operator must have seen partition 0 at leader epoch 0 for the new leader to be an event: its
	// resync looks at every partition, and a pass that started after the initialization has.
	testenv.Eventually(t, 10*time.Second, func() error {
		if c := getPartition(t, ns, group, 0).Status.Conditions; !meta.IsStatusConditionTrue(c, sharestatev1.ConditionInitialized) {
			return fmt.Errorf("partition 0 not reported initialized: %+v", c)
		}
		return nil
	})
	awaitResyncPasses(t, 2)
	b1.read(0, 3)
	b1.mustWrite(0, 0, 3, 6, batch(0, 4, sharestate.DeliveryStateAcknowledged, 1),
		batch(5, 9, sharestate.DeliveryStateAvailable, 1), batch(10, 10, sharestate.DeliveryStateArchived, 2))
	b2.read(1, 2)
	b2.mustWrite(1, 0, 2, -1, batch(0, 2, sharestate.DeliveryStateAvailable, 1))
	if err := env.Client.Delete(ctx, pod2); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 15*time.Second, func() error {
		if s := getGroup(t, sg).Status; s.FencedPartitions != 1 {
			return fmt.Errorf("group status shows %d fenced partitions", s.FencedPartitions)
		}
		return eventsPresent(ns, map[string]string{
			sharestatev1.SharePartitionStateName(group, topicOrders, 0): sharestatev1.EventReasonLeaderChanged,
			sharestatev1.SharePartitionStateName(group, topicOrders, 1): sharestatev1.EventReasonFenced,
		})
	})

	byName := mustRun(t, "describe", "group", sg.Name, "-n", ns)
	byID := mustRun(t, "describe", "group", group, "--namespace", ns)
	anywhere := mustRun(t, "describe", "sg", group, "-A")
	for _, out := range []string{byName, byID, anywhere} {
		expectDescription(t, out, sg)
	}
	mustFail(t, "", `no ShareGroup named "nope" or with group id "nope" in namespace "`+ns+`"`, "describe", "group", "nope", "-n", ns)
}

// expectDescription checks describe's output for TestDescribeGroup's group.
func expectDescription(t *testing.T, out string, sg *sharestatev1.ShareGroup) {
	t.Helper()
	lineMatching(t, out, `^Name:\s+`+sg.Name+`$`)
	lineMatching(t, out, `^Group ID:\s+Describe\.Orders$`)
	lineMatching(t, out, `^Topics:\s+orders \(`+topicOrders+`\), 3 partitions$`)
	// TOPIC PARTITION STATE-EPOCH LEADER-EPOCH START LEADER IN-FLIGHT COMPLETE INITIALIZED FENCED
	lineMatching(t, out, `^\s+orders\s+0\s+0\s+3\s+0\s+1/broker-1\s+5\s+6\s+True\s+False$`)
	lineMatching(t, out, `^\s+orders\s+1\s+1\s+2\s+0\s+-\s+3\s+0\s+True\s+True$`)
	lineMatching(t, out, `^\s+orders\s+2\s+0\s+0\s+0\s+-\s+0\s+0\s+True\s+False$`)
	lineMatching(t, out, `^Totals:\s+3 partitions: 3 initialized, 1 fenced, 1 with a leader; 8 records in flight, 6 delivery complete; highest state epoch 1$`)
	lineMatching(t, out, `^\s+Fenced\s+True\s+PartitionsFenced\s+`)
	lineMatching(t, out, `^Last Offset Reset:\s+<none>$`)
	history := out[strings.Index(out, "Fenced History:"):]
	// Without a kubelet the pod may stay terminating for a while, or go at once.
	lineMatching(t, history, `^\s+orders\s+1\s+True\s+LeaderPod(Deleted|Terminating)\s+.*leader pod broker-2 \(broker 2\) (was deleted|is terminating); state epoch raised to 1$`)
	lineMatching(t, history, `^\s+orders\s+0\s+False\s+LeaderAlive\s+.*broker 1 \(pod broker-1\) leads at leader epoch 3$`)
	events := history[strings.Index(history, "Events (Fenced, LeaderChanged):"):]
	lineMatching(t, events, `^\s+\S+ \(.* ago\)\s+Warning\s+Fenced\s+orders\s+1\s+leader pod broker-2 \(broker 2\) (was deleted|is terminating); state epoch raised to 1$`)
	lineMatching(t, events, `^\s+\S+ \(.* ago\)\s+Normal\s+LeaderChanged\s+orders\s+0\s+broker 1 \(pod broker-1\) leads at leader epoch 3, fencing leader epoch 0$`)
}

// eventsPresent checks that each named object has an event with the given reason.
func eventsPresent(ns string, want map[string]string) error {
	var list eventsv1.EventList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for name, reason := range want {
		found := false
		for _, e := range list.Items {
			found = found || (e.Regarding.Name == name && e.Reason == reason)
		}
		if !found {
			return fmt.Errorf("no %s event for %s among %d events", reason, name, len(list.Items))
		}
	}
	return nil
}

// awaitResyncPasses waits until the operator's resync has ended n more passes over every partition
// (its sharestate_operator_partition_resync_duration_seconds count), so that the last of them started
// after what the caller did before.
func awaitResyncPasses(t *testing.T, n uint64) {
	t.Helper()
	passes := func() uint64 {
		families, err := ctrlmetrics.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "sharestate_operator_partition_resync_duration_seconds" && len(f.GetMetric()) > 0 {
				return f.GetMetric()[0].GetHistogram().GetSampleCount()
			}
		}
		return 0
	}
	want := passes() + n
	testenv.Eventually(t, 30*time.Second, func() error {
		if got := passes(); got < want {
			return fmt.Errorf("%d resync passes, want %d", got, want)
		}
		return nil
	})
}
