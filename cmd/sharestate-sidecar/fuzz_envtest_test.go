package main_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	sharestatev1 "github.com/sharestate/sharestate-operator/api/v1alpha1"
	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The sidecar binary, against a real API server, fed multi-partition requests of all five APIs whose
// bytes decode and whose contents are hostile (see fuzz_gen_envtest_test.go). It must answer every one
// of them, partition by partition in request order, with an error code the spec allows for that
// input; it must never close the connection or die; and a well-behaved broker on another connection
// must get correct answers all along.

// TestSidecarSurvivesHostileRequests runs 300 requests from a random seed, printed so that a failure
// can be replayed (SIDECAR_FUZZ_SEED=<seed>).
func TestSidecarSurvivesHostileRequests(t *testing.T) {
	testenv.Require(t, env)
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SIDECAR_FUZZ_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SIDECAR_FUZZ_SEED: %v", err)
		}
	}
	t.Logf("seed %d (replay with SIDECAR_FUZZ_SEED=%d)", seed, seed)
	runHostile(t, newHostileSidecar(t), seed, 300, 0)
}

// FuzzSidecarRequests is the same check as a fuzz target: each input is a seed and a number of
// requests (at most 24). Its seed corpus runs with every `go test`. One sidecar serves every input of
// a fuzzing process. Run it as
//
//	go test ./cmd/sharestate-sidecar/ -run '^$' -fuzz FuzzSidecarRequests -parallel 1 -fuzzminimizetime 0
//
// Go's fuzzing kills a worker whose input runs past 10 s (and one that takes more than a second to
// stop when fuzzing ends), which leaves the worker's control plane and sidecar running: an input
// stops sending after fuzzBudget, and a control plane may still be left behind at the end. Coverage
// guidance sees only this test's process, not the sidecar's, so the fuzzer explores little more than
// random seeds would; long runs of TestSidecarSurvivesHostileRequests with new seeds do as much.
func FuzzSidecarRequests(f *testing.F) {
	testenv.Require(f, env)
	f.Add(uint64(1), uint16(23))
	f.Add(uint64(20261201), uint16(23))
	f.Add(uint64(0xdeadbeef), uint16(23))
	h := newHostileSidecar(f)
	f.Fuzz(func(t *testing.T, seed uint64, n uint16) {
		runHostile(t, h, seed, 1+int(n)%24, fuzzBudget)
	})
}

// fuzzBudget bounds the requests one fuzz input sends, well under Go's 10 s limit per input.
const fuzzBudget = 4 * time.Second

// hostileSidecar is a sidecar in a namespace of its own where the derived ShareGroup names of two
// group ids are taken by ShareGroups of other group ids, one of which declares its topics.
type hostileSidecar struct {
	sc *sidecar
}

func newHostileSidecar(t testing.TB) *hostileSidecar {
	t.Helper()
	ns := env.Namespace(t)
	for _, sg := range []*sharestatev1.ShareGroup{
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName(groupVictim)},
			Spec: sharestatev1.ShareGroupSpec{GroupID: groupSquatter, Topics: []sharestatev1.ShareGroupTopic{
				{TopicID: sharestatev1.TopicID(sharestate.TopicID(topicDeclared).String()), Partitions: declaredPartitions},
			}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sharestatev1.ShareGroupName(groupUnicodeVictim)},
			Spec:       sharestatev1.ShareGroupSpec{GroupID: groupOtherSquatter},
		},
	} {
		if err := env.Client.Create(context.Background(), sg); err != nil {
			t.Fatalf("creating ShareGroup %s: %v", sg.Name, err)
		}
	}
	return &hostileSidecar{sc: startSidecar(t, ns, sidecarOptions{})}
}

// maxFailures stops a run that has shown enough.
const maxFailures = 20

// runHostile sends n hostile requests from seed, in pipelined bursts of one to four, while a steady
// client works on a group of its own, and checks every answer. With a budget, it sends no burst after
// that time.
func runHostile(t *testing.T, h *hostileSidecar, seed uint64, n int, budget time.Duration) {
	start := time.Now()
	gen := newGenerator(seed)
	stop := make(chan struct{})
	steadyDone := make(chan steadyResult, 1)
	go func() { steadyDone <- runSteady(h.sc.addr, stop) }()
	defer func() {
		close(stop)
		if res := <-steadyDone; res.err != nil {
			t.Errorf("the steady client, after %d rounds: %v", res.rounds, res.err)
		} else {
			t.Logf("the steady client completed %d rounds beside %d hostile requests", res.rounds, n)
		}
	}()

	w, err := dialWire(h.sc.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.close() }()
	failures := 0
	codes := map[string]map[sharestate.ErrorCode]int{} // what was answered, so the log shows what a run covered
	defer func() { t.Logf("answers by API and code: %v", codes) }()
	for sent := 0; sent < n && failures < maxFailures; {
		if budget > 0 && time.Since(start) > budget {
			t.Logf("sent %d of %d requests within the budget of %v", sent, n, budget)
			break
		}
		burst := make([]hostileRequest, min(1+gen.r.IntN(4), n-sent))
		reqs := make([]kmsg.Request, len(burst))
		for i := range burst {
			burst[i] = gen.next()
			reqs[i] = burst[i].req
		}
		sent += len(burst)
		resps, err := w.roundTrip(reqs...)
		for i, resp := range resps {
			count(codes, burst[i].api, resp)
			for _, problem := range checkAnswers(burst[i], resp) {
				failures++
				t.Errorf("request %d: %s", sent-len(burst)+i+1, problem)
			}
		}
		if err != nil {
			failures++
			t.Errorf("requests %d–%d were not all answered: %v; the first unanswered: %s",
				sent-len(burst)+1, sent, err, describe(burst[len(resps)]))
			w = h.reconnect(t, w)
		}
		h.expectRunning(t)
	}
	if failures >= maxFailures {
		t.Fatalf("stopped after %d failures", failures)
	}
}

func count(codes map[string]map[sharestate.ErrorCode]int, api string, resp kmsg.Response) {
	if codes[api] == nil {
		codes[api] = map[sharestate.ErrorCode]int{}
	}
	_, answers := partitionAnswers(resp)
	for _, a := range answers {
		codes[api][a.code]++
	}
}

// reconnect checks, after a connection was closed, that the process is alive and a new connection
// answers a plain ApiVersions.
func (h *hostileSidecar) reconnect(t *testing.T, old *wireClient) *wireClient {
	t.Helper()
	old.close()
	select { // a crash takes a moment to be noticed
	case <-h.sc.exited:
	case <-time.After(500 * time.Millisecond):
	}
	h.expectRunning(t)
	w, err := dialWire(h.sc.addr)
	if err != nil {
		t.Fatalf("the sidecar runs but does not accept a connection: %v", err)
	}
	if err := w.apiVersions(); err != nil {
		t.Fatalf("a new connection does not answer ApiVersions: %v", err)
	}
	return w
}

func (h *hostileSidecar) expectRunning(t *testing.T) {
	t.Helper()
	select {
	case <-h.sc.exited:
		t.Fatalf("the sidecar process exited (%v):\n%s", h.sc.exitErr, h.sc.logs)
	default:
	}
}

// allowedCodes are the codes semantics §3–§6 let each API answer a partition whose input passes the
// checks that need no state: outcomes of the stored state, the topology and the API server's health.
var allowedCodes = map[string][]sharestate.ErrorCode{
	"Initialize": {sharestate.ErrNone, sharestate.ErrFencedStateEpoch, sharestate.ErrUnknownTopicOrPartition,
		sharestate.ErrCoordinatorLoadInProgress, sharestate.ErrCoordinatorNotAvailable},
	"Read": {sharestate.ErrNone, sharestate.ErrInvalidRequest, sharestate.ErrFencedLeaderEpoch, sharestate.ErrUnknownTopicOrPartition,
		sharestate.ErrCoordinatorLoadInProgress, sharestate.ErrCoordinatorNotAvailable},
	"Write": {sharestate.ErrNone, sharestate.ErrInvalidRequest, sharestate.ErrFencedLeaderEpoch, sharestate.ErrFencedStateEpoch,
		sharestate.ErrUnknownTopicOrPartition, sharestate.ErrCoordinatorLoadInProgress, sharestate.ErrCoordinatorNotAvailable},
	"Delete": {sharestate.ErrNone, sharestate.ErrUnknownTopicOrPartition,
		sharestate.ErrCoordinatorLoadInProgress, sharestate.ErrCoordinatorNotAvailable},
	"ReadSummary": {sharestate.ErrNone, sharestate.ErrUnknownTopicOrPartition,
		sharestate.ErrCoordinatorLoadInProgress, sharestate.ErrCoordinatorNotAvailable},
}

// checkAnswers returns what is wrong with a response to h.
func checkAnswers(h hostileRequest, resp kmsg.Response) []string {
	topics, answers := partitionAnswers(resp)
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...)+": "+describe(h))
	}
	if want := topicsOf(h.req); topics != want {
		bad("%d topics answered, %d asked", topics, want)
	}
	if len(answers) != len(h.expect) {
		bad("%d partitions answered, %d asked", len(answers), len(h.expect))
		return problems
	}
	for i, a := range answers {
		e := h.expect[i]
		where := fmt.Sprintf("partition %d of topic %x (answer %d)", e.partition, e.topic, i)
		if a.topic != e.topic || a.partition != e.partition {
			bad("answer %d is for partition %d of topic %x, asked %s", i, a.partition, a.topic, where)
			continue
		}
		if (a.code == sharestate.ErrNone) != (a.msg == nil) {
			bad("%s: %s with message %v (null exactly on success)", where, a.code, a.msg)
		}
		if problem := codeProblem(h, e, a.code); problem != "" {
			bad("%s: %s (%s)", where, problem, messageOf(a.msg))
		}
		if a.problem != "" {
			bad("%s: %s", where, a.problem)
		}
	}
	return problems
}

// codeProblem says why code is not an answer the spec allows for the partition, "" if it is.
func codeProblem(h hostileRequest, e expectation, code sharestate.ErrorCode) string {
	switch {
	case e.invalid && code != sharestate.ErrInvalidRequest:
		return fmt.Sprintf("%s, want INVALID_REQUEST for input that fails the checks", code)
	case e.invalid:
		return ""
	case e.beyond && code != sharestate.ErrUnknownTopicOrPartition:
		return fmt.Sprintf("%s, want UNKNOWN_TOPIC_OR_PARTITION for a partition beyond %d", code, sharestate.MaxPartitions)
	case e.beyond:
		return ""
	case e.undeclared && code == sharestate.ErrNone:
		return "NONE for a partition that the group's ShareGroup does not declare"
	case h.api == "Initialize" && groupNameIsTaken(h.group):
		// Its ShareGroup cannot be created: the persister answers what a retry cannot fix with
		// UNKNOWN_SERVER_ERROR, never NONE (nothing could own the state).
		if !slices.Contains([]sharestate.ErrorCode{sharestate.ErrUnknownServerError,
			sharestate.ErrCoordinatorLoadInProgress, sharestate.ErrCoordinatorNotAvailable}, code) {
			return fmt.Sprintf("%s for a group whose ShareGroup name is taken", code)
		}
		return ""
	case !slices.Contains(allowedCodes[h.api], code):
		return fmt.Sprintf("%s, which %s never answers valid input", code, h.api)
	}
	return ""
}

func topicsOf(req kmsg.Request) int {
	switch r := req.(type) {
	case *kmsg.InitializeShareGroupStateRequest:
		return len(r.Topics)
	case *kmsg.ReadShareGroupStateRequest:
		return len(r.Topics)
	case *kmsg.WriteShareGroupStateRequest:
		return len(r.Topics)
	case *kmsg.DeleteShareGroupStateRequest:
		return len(r.Topics)
	case *kmsg.ReadShareGroupStateSummaryRequest:
		return len(r.Topics)
	}
	panic(fmt.Sprintf("topicsOf: %T", req))
}

// describe renders a request for a failure message: everything but the batches, which are long.
func describe(h hostileRequest) string {
	group := h.group
	if len(group) > 40 {
		group = fmt.Sprintf("%.20q…(%d bytes)", group, len(group))
	} else {
		group = strconv.Quote(group)
	}
	s := fmt.Sprintf("%s v%d group %s", h.api, h.req.GetVersion(), group)
	switch r := h.req.(type) {
	case *kmsg.InitializeShareGroupStateRequest:
		for _, t := range r.Topics {
			s += fmt.Sprintf(" topic %x %+v", t.TopicID, t.Partitions)
		}
	case *kmsg.ReadShareGroupStateRequest:
		s += fmt.Sprintf(" %+v", r.Topics)
	case *kmsg.DeleteShareGroupStateRequest:
		s += fmt.Sprintf(" %+v", r.Topics)
	case *kmsg.ReadShareGroupStateSummaryRequest:
		s += fmt.Sprintf(" %+v", r.Topics)
	case *kmsg.WriteShareGroupStateRequest:
		for _, t := range r.Topics {
			s += fmt.Sprintf(" topic %x", t.TopicID)
			for _, p := range t.Partitions {
				s += fmt.Sprintf(" {p%d se%d le%d so%d dcc%d %d batches}", p.Partition, p.StateEpoch, p.LeaderEpoch,
					p.StartOffset, p.DeliveryCompleteCount, len(p.StateBatches))
			}
		}
	}
	return s
}

func messageOf(m *string) string {
	if m == nil {
		return "no message"
	}
	return *m
}

// steadyResult is how the steady client fared.
type steadyResult struct {
	rounds int
	err    error
}

// steadyGroups numbers the steady client's groups: each run starts from a state of its own.
var steadyGroups atomic.Int64

var steadyTopic = [16]byte{0x57, 0xea, 0xd1}

// runSteady is a well-behaved broker on a connection of its own: it initializes two partitions of a
// group of its own, takes their leadership, and then, round after round until stop, writes both
// (moving the start offset on), reads them back and reads their summary, checking every answer
// against semantics §5. It does one more round after stop: all the hostile traffic is over by then.
func runSteady(addr string, stop <-chan struct{}) steadyResult {
	s := &steady{group: fmt.Sprintf("steady-%d", steadyGroups.Add(1))}
	var err error
	if s.w, err = dialWire(addr); err != nil {
		return steadyResult{err: err}
	}
	defer s.w.close()
	if err := s.begin(); err != nil {
		return steadyResult{err: err}
	}
	rounds := 0
	for {
		select {
		case <-stop:
			err := s.round(int64(rounds + 1))
			if err == nil {
				rounds++
			}
			return steadyResult{rounds: rounds, err: err}
		default:
		}
		if err := s.round(int64(rounds + 1)); err != nil {
			return steadyResult{rounds: rounds, err: err}
		}
		rounds++
	}
}

type steady struct {
	w     *wireClient
	group string
}

var steadyPartitions = []int32{0, 1}

// call sends one request and returns its per-partition answers, retrying (as a broker's client does,
// at most five times) while any partition is answered with a retriable code.
func (s *steady) call(req kmsg.Request) (kmsg.Response, []partAnswer, error) {
	for attempt := 1; ; attempt++ {
		resps, err := s.w.roundTrip(req)
		if err != nil {
			return nil, nil, err
		}
		_, answers := partitionAnswers(resps[0])
		if len(answers) != len(steadyPartitions) {
			return nil, nil, fmt.Errorf("%s: %d partitions answered, want %d", kmsg.NameForKey(req.Key()), len(answers), len(steadyPartitions))
		}
		retry := false
		for i, a := range answers {
			if a.partition != steadyPartitions[i] {
				return nil, nil, fmt.Errorf("%s: answer %d is for partition %d", kmsg.NameForKey(req.Key()), i, a.partition)
			}
			retry = retry || a.code.Retriable()
		}
		if !retry || attempt == 5 {
			for _, a := range answers {
				if a.code != sharestate.ErrNone {
					return nil, nil, fmt.Errorf("%s of partition %d: %s (%s)", kmsg.NameForKey(req.Key()), a.partition, a.code, messageOf(a.msg))
				}
			}
			return resps[0], answers, nil
		}
		time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
	}
}

// begin initializes the partitions at state epoch 1 from offset 0 and reads them as leader epoch 1.
func (s *steady) begin() error {
	initReq := kmsg.NewPtrInitializeShareGroupStateRequest()
	initReq.GroupID = s.group
	initReq.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: steadyTopic}}
	for _, p := range steadyPartitions {
		initReq.Topics[0].Partitions = append(initReq.Topics[0].Partitions, kmsg.InitializeShareGroupStateRequestTopicPartition{Partition: p, StateEpoch: 1})
	}
	if _, _, err := s.call(initReq); err != nil {
		return err
	}
	return s.expectRead(0, nil)
}

// round k writes offsets [10k, 10k+9] as acknowledged with the start offset at 10k, then reads it all
// back: the batches below the new start offset are gone, the new one is there, the epochs unchanged.
func (s *steady) round(k int64) error {
	write := kmsg.NewPtrWriteShareGroupStateRequest()
	write.SetVersion(1) // v1 carries the delivery-complete count
	write.GroupID = s.group
	write.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: steadyTopic}}
	for _, p := range steadyPartitions {
		in := kmsg.NewWriteShareGroupStateRequestTopicPartition()
		in.Partition, in.StateEpoch, in.LeaderEpoch, in.StartOffset, in.DeliveryCompleteCount = p, 1, 1, 10*k, 10
		in.StateBatches = []kmsg.WriteShareGroupStateRequestTopicPartitionStateBatch{
			{FirstOffset: 10 * k, LastOffset: 10*k + 9, DeliveryState: 2, DeliveryCount: 1},
		}
		write.Topics[0].Partitions = append(write.Topics[0].Partitions, in)
	}
	if _, _, err := s.call(write); err != nil {
		return fmt.Errorf("round %d: %w", k, err)
	}
	want := []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch{{FirstOffset: 10 * k, LastOffset: 10*k + 9, DeliveryState: 2, DeliveryCount: 1}}
	if err := s.expectRead(10*k, want); err != nil {
		return fmt.Errorf("round %d: %w", k, err)
	}
	if err := s.expectSummary(10 * k); err != nil {
		return fmt.Errorf("round %d: %w", k, err)
	}
	return nil
}

func (s *steady) expectRead(start int64, batches []kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch) error {
	read := kmsg.NewPtrReadShareGroupStateRequest()
	read.GroupID = s.group
	read.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: steadyTopic}}
	for _, p := range steadyPartitions {
		read.Topics[0].Partitions = append(read.Topics[0].Partitions, kmsg.ReadShareGroupStateRequestTopicPartition{Partition: p, LeaderEpoch: 1})
	}
	resp, _, err := s.call(read)
	if err != nil {
		return err
	}
	for _, p := range resp.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions {
		same := slices.EqualFunc(p.StateBatches, batches, func(a, b kmsg.ReadShareGroupStateResponseTopicPartitionStateBatch) bool {
			return a.FirstOffset == b.FirstOffset && a.LastOffset == b.LastOffset && a.DeliveryState == b.DeliveryState && a.DeliveryCount == b.DeliveryCount
		})
		if p.StateEpoch != 1 || p.StartOffset != start || !same {
			return fmt.Errorf("read of partition %d: state epoch %d, start offset %d, batches %+v; want 1, %d, %+v",
				p.Partition, p.StateEpoch, p.StartOffset, p.StateBatches, start, batches)
		}
	}
	return nil
}

func (s *steady) expectSummary(start int64) error {
	sum := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	sum.SetVersion(1)
	sum.GroupID = s.group
	sum.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: steadyTopic}}
	for _, p := range steadyPartitions {
		sum.Topics[0].Partitions = append(sum.Topics[0].Partitions, kmsg.ReadShareGroupStateSummaryRequestTopicPartition{Partition: p, LeaderEpoch: 1})
	}
	resp, _, err := s.call(sum)
	if err != nil {
		return err
	}
	for _, p := range resp.(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions {
		if p.StateEpoch != 1 || p.LeaderEpoch != 1 || p.StartOffset != start || p.DeliveryCompleteCount != 10 {
			return fmt.Errorf("summary of partition %d: %+v; want state epoch 1, leader epoch 1, start offset %d, 10 complete",
				p.Partition, p, start)
		}
	}
	return nil
}
