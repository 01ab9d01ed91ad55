package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The schema accepts every batch the codec parses, or the persister's writes would be refused: the
// codec's batches at their edges, and random changes of them, are offered to both. What the schema
// refuses it refuses for its shape or length, naming the batch; what it accepts and the codec refuses
// is left to the codec, the grammar's one implementation (TestCorruptStoredStateIsReported).
func TestStateBatchSchemaAcceptsEveryBatchTheCodecParses(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	sps := initialized(t, env.Namespace(t))
	parsed, refused, leftToCodec := 0, 0, 0
	for _, batch := range batchCandidates(rand.New(rand.NewPCG(33, 5))) {
		_, parseErr := sharestate.ParseBatch(batch)
		probe := sps.DeepCopy()
		probe.Status.StateBatches = []sharestatev1.StateBatch{sharestatev1.StateBatch(batch)}
		err := env.Client.Status().Update(ctx, probe, client.DryRunAll)
		switch {
		case parseErr == nil && err != nil:
			t.Errorf("batch %q: the codec parses it, the API server refuses it: %v", batch, err)
		case parseErr == nil:
			parsed++
		case err != nil:
			refused++
			if !strings.Contains(err.Error(), "status.stateBatches[0]") {
				t.Errorf("batch %q: the refusal does not name the batch: %v", batch, err)
			}
		default:
			leftToCodec++
		}
	}
	t.Logf("%d batches parsed and accepted; of the others, %d refused by the schema and %d left to the codec", parsed, refused, leftToCodec)
	if parsed < 100 || refused < 50 || leftToCodec < 20 { // seeded: the counts are always the same
		t.Errorf("%d parsed, %d refused, %d left to the codec: too few of one kind to compare", parsed, refused, leftToCodec)
	}
}

// batchCandidates returns valid batches at the edges of every field and random one-character changes
// of them (a digit, a dash, a slash or a letter replaced, inserted or deleted).
func batchCandidates(r *rand.Rand) []string {
	offsets := []int64{0, 1, 9, 10, 99, 100, 1 << 40, math.MaxInt64 / 10, math.MaxInt64 - 1, math.MaxInt64, r.Int64(), r.Int64()}
	counts := []int16{0, 1, 9999, 10000, 29999, 31999, 32699, 32759, 32767, int16(r.IntN(32768))}
	var valid []string
	for i, first := range offsets {
		for _, last := range offsets[i:] {
			if last < first {
				continue
			}
			for _, state := range []sharestate.DeliveryState{0, 2, 3, 4} {
				count := counts[r.IntN(len(counts))]
				valid = append(valid, sharestate.FormatBatch(sharestate.StateBatch{FirstOffset: first, LastOffset: last, DeliveryState: state, DeliveryCount: count}))
			}
		}
	}
	candidates := append([]string{"", "/", "//", "-/0/0", "0-/0/0", "1-0/0/0", "0/0/", "0/0/-1", "0/1/0", "0/00/0", "0/0/00",
		"9223372036854775808/0/0", "0-9223372036854775808/0/0", "9223372036854775807-9223372036854775807/0/0", "0/0/32768", "0/0/99999", "0/0/100000"}, valid...)
	const alphabet = "0123456789-/a"
	for range 300 {
		b := []byte(valid[r.IntN(len(valid))])
		i := r.IntN(len(b) + 1)
		c := alphabet[r.IntN(len(alphabet))]
		switch r.IntN(3) {
		case 0:
			if i < len(b) {
				b[i] = c
			}
		case 1:
			b = append(b[:i], append([]byte{c}, b[i:]...)...)
		default:
			if i < len(b) {
				b = append(b[:i], b[i+1:]...)
			}
		}
		candidates = append(candidates, string(b))
	}
	return candidates
}

// The schema refuses a string that is not shaped like a batch, or is longer than the longest one, and
// says so in a short pattern; a batch of that shape whose numbers break the grammar is accepted here
// and reported as corrupt by whatever decodes it.
func TestStateBatchSchemaBoundsTheShape(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	tests := []struct {
		batch string
		want  string // "": accepted
	}{
		{"abc", "should match"},
		{"-5/0/1", "should match"},
		{"5/0/1 ", "should match"},
		{"5/10/1", "should match"},
		{"5/0/123456", "should match"},
		{"12345678901234567890/0/1", "should match"},
		{"", "should match"},
		{"9223372036854775806-9223372036854775807/4/32767", ""}, // the longest batch: 47 characters
		{"110/1/1", ""},                                         // ACQUIRED, never stored: the codec's to refuse
		{"110-105/0/1", ""},
		{"0110/0/1", ""},
		{"110/0/40000", ""},
	}
	for _, tt := range tests {
		t.Run(tt.batch, func(t *testing.T) {
			sps := initialized(t, ns)
			sps.Status.StartOffset, sps.Status.StateEpoch = 0, 4 // no start-offset rule in the way
			sps.Status.StateBatches = []sharestatev1.StateBatch{sharestatev1.StateBatch(tt.batch)}
			err := env.Client.Status().Update(ctx, sps)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			expectRefused(t, err, "status.stateBatches[0]", tt.want)
		})
	}
}

// A SharePartitionState holds the state of a partition a ShareGroup could declare: below
// MaxPartitions, the bound of a declared topic's partition count.
func TestPartitionIndexIsBoundLikeTheDeclaredCount(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	ns := env.Namespace(t)
	for _, tt := range []struct {
		partition int32
		refused   bool
	}{{sharestatev1.MaxPartitions - 1, false}, {sharestatev1.MaxPartitions, true}, {5_000_000, true}} {
		sps := newSPS(ns)
		sps.Name, sps.Spec.Partition = fmt.Sprintf("p-%d", tt.partition), tt.partition
		err := env.Client.Create(ctx, sps)
		if !tt.refused {
			if err != nil {
				t.Errorf("partition %d refused: %v", tt.partition, err)
			}
			continue
		}
		expectRefused(t, err, "spec.partition", "999999")
	}
	g := newShareGroup(ns)
	g.Spec.Topics[0].Partitions = sharestatev1.MaxPartitions + 1
	expectRefused(t, env.Client.Create(ctx, g), "spec.topics[0].partitions", "1000000")
	g = newShareGroup(ns)
	g.Spec.OffsetReset = &sharestatev1.OffsetResetRequest{ID: "r1", Topics: []sharestatev1.OffsetResetTopic{{
		TopicID: topicID, To: sharestatev1.OffsetResetToEarliest, Partitions: []int32{sharestatev1.MaxPartitions}}}}
	expectRefused(t, env.Client.Create(ctx, g), "spec.offsetReset.topics[0].partitions[0]")
}

// kubectl get sg shows a count of 0 as 0: a status written without its counts (a merge patch in
// which they stayed 0, or a writer that leaves zeros out) is served with them.
func TestShareGroupCountsOfZeroArePrinted(t *testing.T) {
	testenv.Require(t, env)
	ctx := context.Background()
	g := newShareGroup(env.Namespace(t))
	if err := env.Client.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"status":{"conditions":[{"type":"Ready","status":"False","reason":"NoPartitions",` +
		`"message":"no share-partition state exists for the group yet","lastTransitionTime":"2026-01-02T03:04:05Z"}]}}`)
	if err := env.Client.Status().Patch(ctx, g, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		t.Fatal(err)
	}
	cells := printedRow(t, g)
	for _, column := range []string{"Partitions", "Fenced", "State Epoch"} {
		if v, ok := cells[column]; !ok || v != float64(0) {
			t.Errorf("column %s shows %v, want 0", column, v)
		}
	}
}

// printedRow returns the cells kubectl get shows for the group, by column name: the API server's
// Table of the object.
func printedRow(t *testing.T, g *sharestatev1.ShareGroup) map[string]any {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.RESTClient().Get().AbsPath("/apis/sharestate.dev/v1alpha1/namespaces", g.Namespace, "sharegroups", g.Name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(table.Rows))
	}
	cells := map[string]any{}
	for i, c := range table.ColumnDefinitions {
		cells[c.Name] = table.Rows[0].Cells[i]
	}
	return cells
}
