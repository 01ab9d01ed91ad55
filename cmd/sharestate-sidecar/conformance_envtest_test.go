package main_test

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The conformance tests: the sidecar binary, run against a real API server, driven by franz-go the
// way a broker drives it, answers every operation and error code of the spec (§2–§7).

const (
	errNone        = sharestate.ErrNone
	errInvalid     = sharestate.ErrInvalidRequest
	errFencedState = sharestate.ErrFencedStateEpoch
	errFencedLead  = sharestate.ErrFencedLeaderEpoch
	errUnknownTP   = sharestate.ErrUnknownTopicOrPartition
)

func TestInitialize(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{}).addr)

	r := k.initialize("g", 0, 1, 100)
	expectCode(t, "initialize", r.ErrorCode, r.ErrorMessage, errNone)
	s := k.summary("g", 0, 0)
	if s.StateEpoch != 1 || s.LeaderEpoch != 0 || s.StartOffset != 100 || s.DeliveryCompleteCount != 0 {
		t.Fatalf("a fresh state: %+v", s)
	}
	r = k.initialize("g", 1, 1, -1)
	expectCode(t, "initialize without a start offset", r.ErrorCode, r.ErrorMessage, errNone)
	if s := k.summary("g", 1, 0); s.StartOffset != -1 || s.DeliveryCompleteCount != -1 {
		t.Fatalf("a fresh state with no start offset: %+v", s)
	}

	// At an equal state epoch Initialize writes a fresh state over the progress, as Kafka's coordinator
	// does (it fences only a lower state epoch): the start offset goes down, the leader epoch stays.
	expectCode(t, "read", k.read("g", 0, 1).ErrorCode, nil, errNone)
	w := k.write("g", writeOf(1, 1, 100, 1, batch{100, 104, 2, 1}))
	expectCode(t, "write", w.ErrorCode, w.ErrorMessage, errNone)
	r = k.initialize("g", 0, 1, 5)
	expectCode(t, "initialize again at the same epoch", r.ErrorCode, r.ErrorMessage, errNone)
	if got := k.read("g", 0, 1); got.StateEpoch != 1 || got.StartOffset != 5 || len(got.StateBatches) != 0 {
		t.Fatalf("Initialize at an equal state epoch kept the old state: %+v", got)
	}
	if s := k.summary("g", 0, 0); s.LeaderEpoch != 1 || s.DeliveryCompleteCount != 0 {
		t.Fatalf("Initialize at an equal state epoch: %+v", s)
	}
	r = k.initialize("g", 0, 0, 0)
	expectCode(t, "initialize at an older state epoch", r.ErrorCode, r.ErrorMessage, errFencedState)
	if r.ErrorMessage == nil || k.initialize("g", 0, 1, 0).ErrorMessage != nil {
		t.Fatal("the error message must be set on an error and null on success, as Kafka sends it")
	}
	r = k.initialize("g", 0, 2, 200)
	expectCode(t, "reset at a newer state epoch", r.ErrorCode, r.ErrorMessage, errNone)
	if got := k.read("g", 0, 1); got.StateEpoch != 2 || got.StartOffset != 200 || len(got.StateBatches) != 0 {
		t.Fatalf("after a reset: %+v", got)
	}

	for _, tc := range []struct {
		name       string
		group      string
		partition  int32
		stateEpoch int32
		start      int64
	}{
		{"a negative partition", "g", -1, 1, 0},
		{"a negative state epoch", "g", 3, -1, 0},
		{"a start offset below -1", "g", 3, 1, -2},
		{"no group id", "", 3, 1, 0},
	} {
		r := k.initialize(tc.group, tc.partition, tc.stateEpoch, tc.start)
		expectCode(t, "initialize with "+tc.name, r.ErrorCode, r.ErrorMessage, errInvalid)
	}
	req := kmsg.NewPtrInitializeShareGroupStateRequest()
	req.GroupID = "g"
	req.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: 0, StateEpoch: 1}}}}
	p := k.request(req).(*kmsg.InitializeShareGroupStateResponse).Topics[0].Partitions[0]
	expectCode(t, "initialize with no topic id", p.ErrorCode, p.ErrorMessage, errInvalid)
}

func TestReadAndWrite(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{}).addr)

	rd := k.read("g", 0, 0)
	expectCode(t, "read of an uninitialized partition", rd.ErrorCode, rd.ErrorMessage, errInvalid)
	w := k.write("g", writeOf(0, 0, -1, -1))
	expectCode(t, "write of an uninitialized partition", w.ErrorCode, w.ErrorMessage, errInvalid)

	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	rd = k.read("g", 0, 3)
	if rd.ErrorCode != 0 || rd.StateEpoch != 1 || rd.StartOffset != 0 || len(rd.StateBatches) != 0 {
		t.Fatalf("first read: %+v", rd)
	}
	if s := k.summary("g", 0, 0); s.LeaderEpoch != 3 {
		t.Fatalf("the read did not store its leader epoch: %+v", s)
	}
	w = k.write("g", writeOf(1, 3, 0, 2, batch{0, 1, 2, 1}, batch{2, 4, 0, 1}))
	expectCode(t, "write", w.ErrorCode, w.ErrorMessage, errNone)
	expectBatches(t, "after the write", k.read("g", 0, 3), batch{0, 1, 2, 1}, batch{2, 4, 0, 1})

	w = k.write("g", writeOf(1, 2, 0, -1, batch{2, 2, 2, 1}))
	expectCode(t, "write from an older leader", w.ErrorCode, w.ErrorMessage, errFencedLead)
	w = k.write("g", writeOf(0, 3, 0, -1, batch{2, 2, 2, 1}))
	expectCode(t, "write at an older state epoch", w.ErrorCode, w.ErrorMessage, errFencedState)
	rd = k.read("g", 0, 2)
	expectCode(t, "read from an older leader", rd.ErrorCode, rd.ErrorMessage, errFencedLead)
	expectBatches(t, "fenced writes change nothing", k.read("g", 0, 3), batch{0, 1, 2, 1}, batch{2, 4, 0, 1})

	// The start offset prunes, and never moves back.
	expectCode(t, "advance", k.write("g", writeOf(1, 3, 3, -1)).ErrorCode, nil, errNone)
	expectCode(t, "move back", k.write("g", writeOf(1, 3, 1, -1)).ErrorCode, nil, errNone)
	rd = k.read("g", 0, 3)
	if rd.StartOffset != 3 {
		t.Fatalf("start offset %d, want 3", rd.StartOffset)
	}
	expectBatches(t, "after pruning", rd, batch{3, 4, 0, 1})
}

// The write checks of semantics §4, each answered INVALID_REQUEST and changing nothing.
func TestWriteValidation(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{}).addr)
	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	expectCode(t, "read", k.read("g", 0, 1).ErrorCode, nil, errNone)
	tooMany := make([]batch, 2001)
	for i := range tooMany {
		tooMany[i] = batch{int64(2 * i), int64(2 * i), 2, 1}
	}
	for _, tc := range []struct {
		name string
		w    kmsg.WriteShareGroupStateRequestTopicPartition
	}{
		{"a negative leader epoch", writeOf(1, -1, 0, -1)},
		{"a negative state epoch", writeOf(-1, 1, 0, -1)},
		{"a start offset below -1", writeOf(1, 1, -2, -1)},
		{"a delivery-complete count below -1", writeOf(1, 1, 0, -2)},
		{"an ACQUIRED batch", writeOf(1, 1, 0, -1, batch{0, 1, 1, 1})},
		{"an unknown delivery state", writeOf(1, 1, 0, -1, batch{0, 1, 9, 1})},
		{"a batch ending before it starts", writeOf(1, 1, 0, -1, batch{5, 4, 2, 1})},
		{"a negative offset", writeOf(1, 1, 0, -1, batch{-3, 4, 2, 1})},
		{"a negative delivery count", writeOf(1, 1, 0, -1, batch{0, 4, 2, -1})},
		{"more than 2000 batches", writeOf(1, 1, 0, -1, tooMany...)},
	} {
		w := k.write("g", tc.w)
		expectCode(t, "write with "+tc.name, w.ErrorCode, w.ErrorMessage, errInvalid)
	}
	rd := k.read("g", 0, -1)
	expectCode(t, "read with a negative leader epoch", rd.ErrorCode, rd.ErrorMessage, errInvalid)
	expectBatches(t, "refused writes change nothing", k.read("g", 0, 1))
}

// The first worked example of semantics §7, through the wire.
func TestWriteCombinesBatches(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{}).addr)
	expectCode(t, "initialize", k.initialize("g", 0, 1, -1).ErrorCode, nil, errNone)
	expectCode(t, "read", k.read("g", 0, 1).ErrorCode, nil, errNone)
	expectCode(t, "stored", k.write("g", writeOf(1, 1, -1, -1, batch{111, 120, 0, 1})).ErrorCode, nil, errNone)
	expectCode(t, "new", k.write("g", writeOf(1, 1, -1, -1, batch{111, 113, 0, 2}, batch{114, 114, 2, 1}, batch{115, 119, 0, 2})).ErrorCode, nil, errNone)
	expectBatches(t, "combined", k.read("g", 0, 1), batch{111, 113, 0, 2}, batch{114, 114, 2, 1}, batch{115, 119, 0, 2}, batch{120, 120, 0, 1})
}

func expectBatches(t *testing.T, what string, r kmsg.ReadShareGroupStateResponseTopicPartition, want ...batch) {
	t.Helper()
	if r.ErrorCode != 0 {
		t.Fatalf("%s: read answered %s", what, sharestate.ErrorCode(r.ErrorCode))
	}
	if got := batchesOf(r.StateBatches); !reflect.DeepEqual(got, append([]batch{}, want...)) {
		t.Fatalf("%s: batches %v, want %v", what, got, want)
	}
}

// Write v0 carries no delivery-complete count (the stored one stays); v1 does. ReadSummary v0 has no
// count to answer; v1 has.
func TestWriteAndReadSummaryVersions(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	addr := startSidecar(t, ns, sidecarOptions{}).addr
	k := newKafka(t, addr)
	v0 := kversion.Stable()
	v0.SetMaxKeyVersion(85, 0)
	v0.SetMaxKeyVersion(87, 0)
	old := newKafka(t, addr, kgo.MaxVersions(v0))

	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	expectCode(t, "read", k.read("g", 0, 1).ErrorCode, nil, errNone)
	expectCode(t, "write v1", k.write("g", writeOf(1, 1, 0, 5, batch{0, 4, 2, 1})).ErrorCode, nil, errNone)
	if s := k.summary("g", 0, 0); s.DeliveryCompleteCount != 5 {
		t.Fatalf("after write v1 with a count of 5: %+v", s)
	}
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.GroupID = "g"
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: topicA, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{
		writeOf(1, 1, 0, 9, batch{5, 6, 2, 1}),
	}}}
	resp := old.request(req).(*kmsg.WriteShareGroupStateResponse)
	if resp.GetVersion() != 0 || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("write v0: version %d, %+v", resp.GetVersion(), resp.Topics[0].Partitions[0])
	}
	if s := k.summary("g", 0, 0); s.DeliveryCompleteCount != 5 {
		t.Fatalf("write v0 changed the delivery-complete count: %+v", s)
	}
	expectBatches(t, "write v0 still writes its batches", k.read("g", 0, 1), batch{0, 6, 2, 1})

	sum := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	sum.GroupID = "g"
	sum.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: topicA, Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: 0}}}}
	s0 := old.request(sum).(*kmsg.ReadShareGroupStateSummaryResponse)
	p := s0.Topics[0].Partitions[0]
	if s0.GetVersion() != 0 || p.ErrorCode != 0 || p.StateEpoch != 1 || p.LeaderEpoch != 1 || p.StartOffset != 0 || p.DeliveryCompleteCount != -1 {
		t.Fatalf("read summary v0: version %d, %+v", s0.GetVersion(), p)
	}
}

func TestDeleteAndReadSummary(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{}).addr)
	s := k.summary("g", 0, 0)
	if s.ErrorCode != 0 || s.StateEpoch != 0 || s.LeaderEpoch != 0 || s.StartOffset != -1 || s.DeliveryCompleteCount != -1 {
		t.Fatalf("summary of no state: %+v", s)
	}
	d := k.remove("g", 0)
	expectCode(t, "delete of nothing", d.ErrorCode, d.ErrorMessage, errNone)

	expectCode(t, "initialize", k.initialize("g", 0, 3, 10).ErrorCode, nil, errNone)
	expectCode(t, "read", k.read("g", 0, 2).ErrorCode, nil, errNone)
	expectCode(t, "write", k.write("g", writeOf(3, 2, 10, 1, batch{10, 10, 2, 1})).ErrorCode, nil, errNone)
	if s := k.summary("g", 0, 0); s.StateEpoch != 3 || s.LeaderEpoch != 2 || s.StartOffset != 10 || s.DeliveryCompleteCount != 1 {
		t.Fatalf("summary: %+v", s)
	}
	d = k.remove("g", 0)
	expectCode(t, "delete", d.ErrorCode, d.ErrorMessage, errNone)
	expectCode(t, "read after delete", k.read("g", 0, 2).ErrorCode, nil, errInvalid)
	expectCode(t, "write after delete", k.write("g", writeOf(3, 2, 10, -1)).ErrorCode, nil, errInvalid)
	if s := k.summary("g", 0, 0); s.StateEpoch != 0 || s.StartOffset != -1 {
		t.Fatalf("summary after delete: %+v", s)
	}
	expectCode(t, "initialize after delete", k.initialize("g", 0, 0, 0).ErrorCode, nil, errNone)
	for _, p := range []int32{-1} {
		expectCode(t, "delete of a negative partition", k.remove("g", p).ErrorCode, nil, errInvalid)
		expectCode(t, "summary of a negative partition", k.summary("g", p, 0).ErrorCode, nil, errInvalid)
	}
}

// A ShareGroup that declares its topics makes every other partition unknown (semantics §6).
func TestUnknownTopicOrPartition(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	sg := &sharestatev1.ShareGroup{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName("declared")},
		Spec:       sharestatev1.ShareGroupSpec{GroupID: "declared", Topics: []sharestatev1.ShareGroupTopic{{TopicID: sharestatev1.TopicID(topicA.String()), Partitions: 2}}},
	}
	if err := env.Client.Create(context.Background(), sg); err != nil {
		t.Fatal(err)
	}
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{}).addr)
	expectCode(t, "initialize a declared partition", k.initialize("declared", 1, 1, 0).ErrorCode, nil, errNone)
	expectCode(t, "initialize past the partition count", k.initialize("declared", 2, 1, 0).ErrorCode, nil, errUnknownTP)
	expectCode(t, "summary past the partition count", k.summary("declared", 2, 0).ErrorCode, nil, errUnknownTP)
	expectCode(t, "delete past the partition count", k.remove("declared", 2).ErrorCode, nil, errUnknownTP)
	expectCode(t, "read past the partition count: uninitialized comes first", k.read("declared", 2, 0).ErrorCode, nil, errInvalid)
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.GroupID = "declared"
	req.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: topicB, Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: 0}}}}
	p := k.request(req).(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions[0]
	expectCode(t, "summary of an undeclared topic", p.ErrorCode, p.ErrorMessage, errUnknownTP)
}

// One request for many partitions of many topics: each is answered on its own, in request order.
func TestMultiPartitionRequests(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{}).addr)
	init := kmsg.NewPtrInitializeShareGroupStateRequest()
	init.GroupID = "g"
	init.Topics = []kmsg.InitializeShareGroupStateRequestTopic{
		{TopicID: topicA, Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: 0, StateEpoch: 1}, {Partition: 1, StateEpoch: 1}, {Partition: -1, StateEpoch: 1}}},
		{TopicID: topicB, Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: 0, StateEpoch: 1}}},
	}
	initResp := k.request(init).(*kmsg.InitializeShareGroupStateResponse)
	expectAnswers(t, "initialize", answersOf(initResp.Topics, func(t kmsg.InitializeShareGroupStateResponseTopic) ([16]byte, []answer) {
		out := make([]answer, len(t.Partitions))
		for i, p := range t.Partitions {
			out[i] = answer{p.Partition, p.ErrorCode}
		}
		return t.TopicID, out
	}), []answer{{0, 0}, {1, 0}, {-1, 42}}, []answer{{0, 0}})
	expectCode(t, "read", k.read("g", 1, 5).ErrorCode, nil, errNone) // partition 1 now at leader epoch 5

	w := kmsg.NewPtrWriteShareGroupStateRequest()
	w.GroupID = "g"
	w.Topics = []kmsg.WriteShareGroupStateRequestTopic{
		{TopicID: topicA, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{
			withPartition(0, writeOf(1, 1, 0, -1, batch{0, 1, 2, 1})),
			withPartition(1, writeOf(1, 1, 0, -1)), // fenced: leader epoch 5 is stored
			withPartition(2, writeOf(1, 1, 0, -1)), // uninitialized
		}},
		{TopicID: topicB, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{withPartition(0, writeOf(0, 1, 0, -1))}}, // fenced state epoch
	}
	wResp := k.request(w).(*kmsg.WriteShareGroupStateResponse)
	expectAnswers(t, "write", answersOf(wResp.Topics, func(t kmsg.WriteShareGroupStateResponseTopic) ([16]byte, []answer) {
		out := make([]answer, len(t.Partitions))
		for i, p := range t.Partitions {
			out[i] = answer{p.Partition, p.ErrorCode}
		}
		return t.TopicID, out
	}), []answer{{0, 0}, {1, 74}, {2, 42}}, []answer{{0, 124}})
	expectBatches(t, "the good partition's write landed", k.read("g", 0, 1), batch{0, 1, 2, 1})
}

// answer is a partition's index and error code.
type answer struct {
	partition int32
	code      int16
}

func answersOf[T any](topics []T, of func(T) ([16]byte, []answer)) map[[16]byte][]answer {
	out := map[[16]byte][]answer{}
	for _, t := range topics {
		id, a := of(t)
		out[id] = a
	}
	return out
}

func expectAnswers(t *testing.T, what string, got map[[16]byte][]answer, wantA, wantB []answer) {
	t.Helper()
	want := map[[16]byte][]answer{topicA: wantA, topicB: wantB}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: answers %v, want %v (in request order)", what, got, want)
	}
}

func withPartition(p int32, w kmsg.WriteShareGroupStateRequestTopicPartition) kmsg.WriteShareGroupStateRequestTopicPartition {
	w.Partition = p
	return w
}

// A corrupt stored state is reported as UNKNOWN_SERVER_ERROR, never used.
func TestCorruptStateIsUnknownServerError(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{}).addr)
	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	var obj sharestatev1.SharePartitionState
	key := client.ObjectKey{Namespace: ns, Name: sharestatev1.SharePartitionStateName("g", topicA.String(), 0)}
	if err := env.Client.Get(context.Background(), key, &obj); err != nil {
		t.Fatal(err)
	}
	obj.Status.StateBatches = []sharestatev1.StateBatch{"5-10/0/1", "7/2/1"} // each valid, together overlapping
	if err := env.Client.Status().Update(context.Background(), &obj); err != nil {
		t.Fatal(err)
	}
	r := k.read("g", 0, 0)
	expectCode(t, "read of a corrupt state", r.ErrorCode, r.ErrorMessage, sharestate.ErrUnknownServerError)
}

// More writes queued for one partition than --max-pending-writes are answered
// COORDINATOR_LOAD_IN_PROGRESS, at once; the rest succeed.
func TestLoadInProgress(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{args: []string{"--max-pending-writes=1"}}).addr)
	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	expectCode(t, "read", k.read("g", 0, 1).ErrorCode, nil, errNone)
	codes := make([]int16, 64)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Go(func() { codes[i] = k.write("g", writeOf(1, 1, -1, -1, batch{int64(i), int64(i), 2, 1})).ErrorCode })
	}
	wg.Wait()
	counts := map[int16]int{}
	for _, c := range codes {
		counts[c]++
	}
	if counts[int16(sharestate.ErrCoordinatorLoadInProgress)] == 0 || counts[0] == 0 || counts[0]+counts[14] != len(codes) {
		t.Fatalf("64 concurrent writes with one allowed to queue: codes %v, want NONE and COORDINATOR_LOAD_IN_PROGRESS only, some of each", counts)
	}
}

// With the API server out of reach, every operation is answered COORDINATOR_NOT_AVAILABLE within the
// operation timeout, and the sidecar is alive and ready: its Kafka listeners serve (in proxy mode,
// the broker's inter-broker traffic), and the API server's absence is its metric.
func TestUnreachableAPIServer(t *testing.T) {
	testenv.Require(t, env)
	cfg := *env.Config
	cfg.Host = "https://127.0.0.1:1" // nothing listens there
	s := startSidecar(t, "unreachable", sidecarOptions{kubeconfig: testenv.AdminKubeconfig(t, &cfg), args: []string{"--operation-timeout=1s", "--request-timeout=2s"}})
	for _, path := range []string{"/readyz", "/healthz"} {
		if got := s.probe(path); got != 200 {
			t.Fatalf("%s answered %d with the API server out of reach, want 200", path, got)
		}
	}
	s.waitFor(t, "the unreachable API server in the log", func() bool {
		return strings.Contains(s.logs.String(), "Kubernetes API server became unreachable")
	})
	if got := s.metric(t, apiReachable); got != "0" {
		t.Fatalf("%s = %q, want 0", apiReachable, got)
	}
	k := newKafka(t, s.addr)
	start := time.Now()
	w := k.write("g", writeOf(1, 1, 0, -1))
	expectCode(t, "write", w.ErrorCode, w.ErrorMessage, sharestate.ErrCoordinatorNotAvailable)
	r := k.read("g", 0, 1)
	expectCode(t, "read", r.ErrorCode, r.ErrorMessage, sharestate.ErrCoordinatorNotAvailable)
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("took %v: the operation and request timeouts are not applied", d)
	}
}

// The sidecar's flags and downward-API variables name the leader it records.
func TestLeaderIdentityIsRecorded(t *testing.T) {
	testenv.Require(t, env)
	ns := env.Namespace(t)
	k := newKafka(t, startSidecar(t, ns, sidecarOptions{brokerID: 7}).addr)
	expectCode(t, "initialize", k.initialize("g", 0, 1, 0).ErrorCode, nil, errNone)
	expectCode(t, "read", k.read("g", 0, 4).ErrorCode, nil, errNone)
	var obj sharestatev1.SharePartitionState
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: sharestatev1.SharePartitionStateName("g", topicA.String(), 0)}, &obj); err != nil {
		t.Fatal(err)
	}
	if l := obj.Status.Leader; l == nil || l.BrokerID != 7 || l.PodName != "broker-7" || l.PodUID != "uid-7" || l.LeaderEpoch != 4 {
		t.Fatalf("leader %+v, want broker 7 (pod broker-7, uid-7) at leader epoch 4", obj.Status.Leader)
	}
	// The sidecar's role lets its persister reset the object's managedFields.
	if len(obj.ManagedFields) != 0 {
		t.Fatalf("the object has managedFields %+v: the sidecar's role lacks patch on it?", obj.ManagedFields)
	}
}
