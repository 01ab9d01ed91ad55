package plugin_test

import (
	"encoding/json"
	"testing"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
)

// dumped is the part of dump's yaml and json output the tests read.
type dumped struct {
	GroupID         string `json:"groupId"`
	TopicName       string `json:"topicName"`
	Partition       int32  `json:"partition"`
	StateEpoch      int32  `json:"stateEpoch"`
	LeaderEpoch     int32  `json:"leaderEpoch"`
	StartOffset     int64  `json:"startOffset"`
	InFlightRecords *int64 `json:"inFlightRecords"`
	Leader          *struct {
		PodName string `json:"podName"`
	} `json:"leader"`
	Batches []struct {
		Stored        string `json:"stored"`
		FirstOffset   *int64 `json:"firstOffset"`
		LastOffset    *int64 `json:"lastOffset"`
		State         string `json:"state"`
		DeliveryCount *int16 `json:"deliveryCount"`
		Problem       string `json:"problem"`
	} `json:"batches"`
	Corrupt string `json:"corrupt"`
}

func TestDump(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	const group = "dump-orders"
	sg := declareGroup(t, ns, group, 2)
	b := newBroker(t, ns, group, 1, brokerPod(t, ns, "broker-1"))
	b.initialize(0, 0, 0)
	b.read(0, 4)
	b.mustWrite(0, 0, 4, 4, batch(0, 2, sharestate.DeliveryStateAcknowledged, 1),
		batch(3, 7, sharestate.DeliveryStateAvailable, 2), batch(8, 8, sharestate.DeliveryStateArchived, 5))

	out := mustRun(t, "dump", sg.Name, "-n", ns, "--topic", "orders", "--partition", "0")
	lineMatching(t, out, `^Topic:\s+orders \(`+topicOrders+`\)$`)
	lineMatching(t, out, `^Leader Epoch:\s+4$`)
	lineMatching(t, out, `^In Flight:\s+5$`)
	lineMatching(t, out, `^Delivery Complete:\s+4$`)
	lineMatching(t, out, `^Leader:\s+broker 1, pod broker-1, leader epoch 4, since `)
	lineMatching(t, out, `^FIRST\s+LAST\s+STATE\s+DELIVERY COUNT\s+RECORDS$`)
	lineMatching(t, out, `^0\s+2\s+ACKNOWLEDGED\s+1\s+3$`)
	lineMatching(t, out, `^3\s+7\s+AVAILABLE\s+2\s+5$`)
	lineMatching(t, out, `^8\s+8\s+ARCHIVED\s+5\s+1$`)

	for _, format := range []string{"yaml", "json"} {
		out = mustRun(t, "dump", group, "-n", ns, "--topic", topicOrders, "--partition", "0", "-o", format)
		var d dumped
		unmarshal := func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
		if format == "json" {
			unmarshal = json.Unmarshal // strict JSON: yaml would accept it too
		}
		if err := unmarshal([]byte(out), &d); err != nil {
			t.Fatalf("-o %s: %v", format, err)
		}
		if d.GroupID != group || d.TopicName != "orders" || d.StateEpoch != 0 || d.LeaderEpoch != 4 || d.StartOffset != 0 ||
			d.InFlightRecords == nil || *d.InFlightRecords != 5 || d.Leader == nil || d.Leader.PodName != "broker-1" || len(d.Batches) != 3 {
			t.Fatalf("-o %s: %+v", format, d)
		}
		if m := d.Batches[1]; m.Stored != "3-7/0/2" || *m.FirstOffset != 3 || *m.LastOffset != 7 || m.State != "AVAILABLE" || *m.DeliveryCount != 2 {
			t.Fatalf("-o %s: batch 1 is %+v", format, m)
		}
	}

	expectDumpFormats(t, ns, group)

	mustFail(t, "", `group "dump-orders" has no state for partition 1 of topic orders`, "dump", sg.Name, "-n", ns, "--topic", "orders", "--partition", "1")
	mustFail(t, "", `--output "xml": want one of json, yaml`, "dump", sg.Name, "-n", ns, "--topic", "orders", "--partition", "0", "-o", "xml")
	mustFail(t, "", "--partition is required", "dump", sg.Name, "-n", ns, "--topic", "orders")
	mustFail(t, "", `topic "payments" is neither a Kafka topic id`, "dump", sg.Name, "-n", ns, "--topic", "payments", "--partition", "0")
}

// expectDumpFormats checks dump's jsonpath, custom-columns and name formats on TestDump's partition.
func expectDumpFormats(t *testing.T, ns, group string) {
	t.Helper()
	spsName := sharestatev1.SharePartitionStateName(group, topicOrders, 0)
	out := mustRun(t, "dump", group, "-n", ns, "--topic", "orders", "--partition", "0", "-o", "jsonpath={.kind} {.apiVersion} {.metadata.name} {.batches[1].state}")
	if want := "SharePartitionStateDump plugin.sharestate.dev/v1alpha1 " + spsName + " AVAILABLE"; out != want {
		t.Fatalf("dump -o jsonpath: %q, want %q", out, want)
	}
	out = mustRun(t, "dump", group, "-n", ns, "--topic", "orders", "--partition", "0", "-o", "custom-columns=FIRST:.batches[*].firstOffset,IN-FLIGHT:.inFlightRecords")
	lineMatching(t, out, `^FIRST\s+IN-FLIGHT$`)
	lineMatching(t, out, `^0,3,8\s+5$`)
	if out := mustRun(t, "dump", group, "-n", ns, "--topic", "orders", "--partition", "0", "-o", "name"); out != "sharepartitionstatedump.plugin.sharestate.dev/"+spsName+"\n" {
		t.Fatalf("dump -o name: %q", out)
	}
}

// Batches that each pass the schema but overlap are a corrupt state: dump shows every batch, marks the
// bad one and fails; describe counts the partition as corrupt.
func TestDumpReportsCorruptBatches(t *testing.T) {
	requireEnv(t)
	ns := env.Namespace(t)
	const group = "dump-corrupt"
	sg := declareGroup(t, ns, group, 1)
	newBroker(t, ns, group, 1, nil).initialize(0, 0, 0)
	// The operator writes the partition's conditions meanwhile: retry on its conflicts.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sps := getPartition(t, ns, group, 0)
		sps.Status.StateBatches = []sharestatev1.StateBatch{"10-20/0/1", "15/2/1", "30/4/1"}
		return env.Client.Status().Update(ctx, sps)
	}); err != nil {
		t.Fatal(err)
	}

	r := mustFail(t, "", `the stored state of partition 0 of topic `+topicOrders+` is corrupt: stateBatches[1]: "15/2/1" overlaps or precedes "10-20/0/1"`,
		"dump", sg.Name, "-n", ns, "--topic", "orders", "--partition", "0")
	lineMatching(t, r.out, `^In Flight:\s+<corrupt>$`)
	lineMatching(t, r.out, `^FIRST\s+LAST\s+STATE\s+DELIVERY COUNT\s+RECORDS\s+STORED\s+PROBLEM$`)
	lineMatching(t, r.out, `^10\s+20\s+AVAILABLE\s+1\s+11\s+10-20/0/1\s+-$`)
	lineMatching(t, r.out, `^15\s+15\s+ACKNOWLEDGED\s+1\s+1\s+15/2/1\s+overlaps or precedes the batch before it \(10-20/0/1\)$`)
	lineMatching(t, r.out, `^30\s+30\s+ARCHIVED\s+1\s+1\s+30/4/1\s+-$`)

	r = mustFail(t, "", "is corrupt", "dump", sg.Name, "-n", ns, "--topic", "orders", "--partition", "0", "-o", "yaml")
	var d dumped
	if err := yaml.Unmarshal([]byte(r.out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Corrupt == "" || d.InFlightRecords != nil || len(d.Batches) != 3 || d.Batches[1].Problem == "" || d.Batches[2].Problem != "" {
		t.Fatalf("corrupt state as yaml: %+v", d)
	}

	out := mustRun(t, "describe", "group", group, "-n", ns)
	lineMatching(t, out, `^\s+orders\s+0\s+0\s+0\s+0\s+-\s+<corrupt>\s+`)
	lineMatching(t, out, `^\s+Warning: partition 0 of orders \(\S+\) holds corrupt state batches: stateBatches\[1\]`)
	lineMatching(t, out, `; 1 corrupt \(not counted\)$`)
}
