package persister_test

// Spec §10.6: every history of concurrent operations is linearizable against the sequential rules of
// §4–§7. Several persisters, each with a client and a connection of its own as if in its own broker
// pod, hammer two partitions of one topic with random operations while a fencing actor resets state
// epochs, raises leader epochs and deletes; porcupine then checks the recorded history, per
// partition, against rules.go. An answer that says the store could not be reached, or that something
// unexpected happened, may or may not have taken effect: the model allows both (checkLinearizable
// says when). A last Read after quiescence makes every Write answered NONE count (semantics §10.1).

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sharestate/sharestate-operator/pkg/sharestate"
	"github.com/sharestate/sharestate-operator/test/faultproxy"
	"github.com/sharestate/sharestate-operator/test/testenv"
)

// The shape of a run.
const (
	linGroup         = "linearizability"
	linTopic         = "q1Sh0o2QRbuBzMz8vEMbvQ"
	linPartitions    = 2
	linBrokers       = 4
	linWorkers       = 2    // concurrent callers per broker's persister
	linRequests      = 2400 // requests of all brokers together
	linMinOperations = 2000 // operations (one per partition of a request) the history must hold at least
	// linMaxRunTime only catches a run that hangs: an idle machine takes a fraction of it, and one
	// with both cores busy elsewhere several times as long.
	linMaxRunTime   = 3 * time.Minute
	linCheckTimeout = 30 * time.Second
	// linLateEffect is how long after its ambiguous answer an operation may take effect in the second
	// check (see checkLinearizable).
	linLateEffect     = 250 * time.Millisecond
	untilEnd          = time.Duration(math.MaxInt64)
	linFencerClientID = linBrokers * linWorkers
)

var linTopicID = func() sharestate.TopicID {
	id, err := sharestate.ParseTopicID(linTopic)
	if err != nil {
		panic(err)
	}
	return id
}()

func TestLinearizable(t *testing.T) {
	testenv.Require(t, env)
	h := runLinearizability(t, "", uint64(time.Now().UnixNano()))
	checkLinearizable(t, h)
}

func TestLinearizableWithDroppedConnections(t *testing.T) {
	testenv.Require(t, env)
	seed := uint64(time.Now().UnixNano())
	proxy := startAPIProxy(t, seed)
	stopDrops := dropRepeatedly(proxy, seed, 100*time.Millisecond, 500*time.Millisecond)
	h := runLinearizability(t, "https://"+proxy.Addr(), seed)
	stopDrops()
	stats := proxy.Stats()
	t.Logf("proxy: %d connections accepted, %d dropped", stats.Accepted, stats.Dropped)
	if stats.Dropped < 20 {
		t.Errorf("the proxy dropped only %d connections: the run did not test what it claims", stats.Dropped)
	}
	checkLinearizable(t, h)
}

// opKind is one of the five operations.
func checkWorkload(t *testing.T, h []porcupine.Operation, clean bool) {
	t.Helper()
	counts, examples := map[string]int{}, map[string]string{}
	for _, op := range h {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		key := fmt.Sprintf("%s %s", [...]string{"Initialize", "Read", "Write", "Delete", "ReadSummary"}[in.kind], out.code)
		counts[key]++
		if out.message != "" && examples[key] == "" {
			examples[key] = out.message
		}
		if in.kind == opRead && out.code == sharestate.ErrNone && len(out.read.StateBatches) > 0 {
			counts["Read NONE with batches"]++
		}
		if out.ambiguous() {
			counts["ambiguous"]++
		}
	}
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(&b, "\n  %-32s %5d  %s", k, counts[k], examples[k])
	}
	t.Logf("%d operations:%s", len(h), b.String())
	if n := countCode(h, sharestate.ErrUnknownServerError); clean && n > 0 {
		t.Errorf("%d operations answered UNKNOWN_SERVER_ERROR in a run without faults", n)
	}
	if len(h) < linMinOperations {
		t.Errorf("only %d operations, want at least %d", len(h), linMinOperations)
	}
	for key, least := range map[string]int{
		"Write NONE": 300, "Read NONE with batches": 50, "Write FENCED_STATE_EPOCH": 10,
		"Write FENCED_LEADER_EPOCH": 10, "Initialize NONE": 20, "Delete NONE": 5, "ReadSummary NONE": 50,
	} {
		if counts[key] < least {
			t.Errorf("only %d × %q, want at least %d", counts[key], key, least)
		}
	}
}

func countCode(h []porcupine.Operation, code sharestate.ErrorCode) int {
	n := 0
	for _, op := range h {
		if op.Output.(linOutput).code == code {
			n++
		}
	}
	return n
}

// checkLinearizable checks the history of the operations; when it is not linearizable it writes
// porcupine's visualization and the history to files and names them.
//
// An operation that may or may not have taken effect may do so at any time after its call, or never.
// Each such operation is concurrent with everything after it, and a few dozen of them make the search
// explode, most of all when it must prove that no order fits. So the history is checked first with
// each taking effect, if at all, before its answer (a persister that answers once its requests are
// done or abandoned), then, only if that fails, with later effects allowed: linLateEffect after the
// answer (an API server that commits an abandoned request a little later), then without bound. The
// first pass is a pass; a failure names the most lenient check that failed.
func checkLinearizable(t *testing.T, ops []porcupine.Operation) {
	t.Helper()
	model := linModel()
	failed := time.Duration(-1)
checks:
	for i, grace := range []time.Duration{0, linLateEffect, untilEnd} {
		started := time.Now()
		res := porcupine.CheckOperationsTimeout(model, linHistory(ops, grace), linCheckTimeout>>i)
		t.Logf("linearizability check, %s: %s in %v", effectWindow(grace), res, time.Since(started).Round(time.Millisecond))
		switch res {
		case porcupine.Ok:
			return
		case porcupine.Illegal:
			failed = grace
		default:
			break checks
		}
	}
	if failed < 0 {
		t.Errorf("the linearizability check did not finish within %v", linCheckTimeout)
		return
	}
	h := linHistory(ops, failed)
	_, info := porcupine.CheckOperationsVerbose(model, h, linCheckTimeout)
	t.Errorf("the history is not linearizable, %s%s\n  visualization: %s\n  history: %s",
		effectWindow(failed), explainFailure(model, info, h),
		writeTemp(t, "sharestate-linearizability-*.html", func(f *os.File) error { return porcupine.Visualize(model, info, f) }),
		writeTemp(t, "sharestate-linearizability-*.txt", func(f *os.File) error { return writeHistory(f, h) }))
}

// effectWindow says when an operation with an ambiguous answer may take effect in a check.
func effectWindow(grace time.Duration) string {
	switch grace {
	case 0:
		return "ambiguous operations taking effect before their answers if at all"
	case untilEnd:
		return "ambiguous operations taking effect at any time after their calls if at all"
	default:
		return fmt.Sprintf("ambiguous operations taking effect up to %v after their answers if at all", grace)
	}
}

// explainFailure says, for each partition whose history failed, where the longest linearization the
// checker found ends: its last operations, the model's states after them, and the first operation
// that no order could place next, with the operations that overlap it.
func explainFailure(model porcupine.Model, info porcupine.LinearizationInfo, h []porcupine.Operation) string {
	var b strings.Builder
	histories := model.Partition(h)
	for p, partials := range info.PartialLinearizations() {
		ops := histories[p]
		var longest []int
		for _, l := range partials {
			if len(l) > len(longest) {
				longest = l
			}
		}
		if len(longest) == len(ops) {
			continue
		}
		state, placed := model.Init(), make([]bool, len(ops))
		for _, id := range longest {
			_, state = model.Step(state, ops[id].Input, ops[id].Output)
			placed[id] = true
		}
		stuck := -1
		for id, op := range ops {
			if !placed[id] && (stuck < 0 || op.Return < ops[stuck].Return) {
				stuck = id
			}
		}
		fmt.Fprintf(&b, "\n  partition %d: %d of %d operations linearized, ending with:", p, len(longest), len(ops))
		for _, id := range longest[max(0, len(longest)-4):] {
			fmt.Fprintf(&b, "\n    %s", describeTimed(ops[id]))
		}
		fmt.Fprintf(&b, "\n  model states then: %s\n  no order places next: %s", model.DescribeState(state), describeTimed(ops[stuck]))
		shown := 0
		for id, op := range ops {
			if !placed[id] && id != stuck && op.Call <= ops[stuck].Return && shown < 12 {
				fmt.Fprintf(&b, "\n    overlapping: %s", describeTimed(op))
				shown++
			}
		}
	}
	return b.String()
}

func describeTimed(op porcupine.Operation) string {
	return fmt.Sprintf("client %d [%.6fs, %.6fs] %s", op.ClientId, float64(op.Call)/1e9, float64(op.Return)/1e9,
		describeOperation(op.Input, op.Output))
}

func writeTemp(t *testing.T, pattern string, write func(*os.File) error) string {
	t.Helper()
	f, err := os.CreateTemp("", pattern)
	if err != nil {
		return fmt.Sprintf("(cannot create: %v)", err)
	}
	defer func() { _ = f.Close() }()
	if err := write(f); err != nil {
		return fmt.Sprintf("%s (incomplete: %v)", f.Name(), err)
	}
	return f.Name()
}

// writeHistory lists the operations of each partition by call time, one a line.
func writeHistory(f *os.File, h []porcupine.Operation) error {
	sorted := slices.Clone(h)
	slices.SortStableFunc(sorted, func(a, b porcupine.Operation) int {
		pa, pb := a.Input.(linInput).partition(), b.Input.(linInput).partition()
		return cmp.Or(cmp.Compare(pa, pb), cmp.Compare(a.Call, b.Call))
	})
	for _, op := range sorted {
		if _, err := fmt.Fprintln(f, describeTimed(op)); err != nil {
			return err
		}
	}
	return nil
}

// --- Dropped connections. ---

// startAPIProxy starts a fault proxy in front of the API server's TLS port.
func startAPIProxy(t *testing.T, seed uint64) *faultproxy.Proxy {
	t.Helper()
	host := env.Config.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		t.Fatalf("parsing the API server's address %q: %v", env.Config.Host, err)
	}
	proxy, err := faultproxy.New(faultproxy.Options{
		Target: u.Host,
		Seed:   seed,
		// Past the TLS handshake, a connection carries a few requests, or lives a few hundred
		// milliseconds, before the proxy cuts it, most often in the middle of a request.
		Faults: faultproxy.Faults{MinBytes: 8 << 10, MaxBytes: 64 << 10, MinLifetime: 20 * time.Millisecond, MaxLifetime: 800 * time.Millisecond},
	})
	if err != nil {
		t.Fatalf("starting the fault proxy: %v", err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	return proxy
}

// dropRepeatedly drops every connection of the proxy at random intervals until stop is called.
func dropRepeatedly(proxy *faultproxy.Proxy, seed uint64, minGap, maxGap time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(seed, 2<<32))
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(minGap + time.Duration(rng.Int64N(int64(maxGap-minGap)))):
				proxy.DropAll()
			}
		}
	})
	return func() { close(done); wg.Wait() }
}
