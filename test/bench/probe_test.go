package bench

import (
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// A command name may hold spaces and parentheses; the fields are counted from the last ')'.
	const stat = "4242 (kube (api) server) S 17 4242 17 0 -1 4194560 1234 0 0 0 250 130 0 0 20 0 12 0 100 0 0"
	comm, ppid, cpu, err := parseStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	if comm != "kube (api) server" || ppid != 17 || cpu != 3800*time.Millisecond {
		t.Errorf("parseStat = %q, %d, %v; want %q, 17, 3.8s (380 ticks)", comm, ppid, cpu, "kube (api) server")
	}
	for _, bad := range []string{"", "1 comm S 1", "1 (x) S 1 2 3", "1 (x) S p 1 1 0 -1 0 0 0 0 0 1 1"} {
		if _, _, _, err := parseStat(bad); err == nil {
			t.Errorf("parseStat(%q): no error", bad)
		}
	}
}

func TestCPUProbeReadsThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	p := newCPUProbe()
	if len(p.procs) == 0 || p.procs[0].name != "bench" || p.procs[0].pid != os.Getpid() {
		t.Fatalf("procs = %+v, want this process first", p.procs)
	}
	before := p.sample()
	for deadline := time.Now().Add(100 * time.Millisecond); time.Now().Before(deadline); {
	}
	after := p.sample()
	if len(after) != len(p.procs)+1 {
		t.Fatalf("%d samples for %d processes, want one more for the machine", len(after), len(p.procs))
	}
	// This process and the machine were busy; the machine at least as much as this process.
	self, machine := after[0]-before[0], after[len(p.procs)]-before[len(p.procs)]
	if !(self > 0) || !(machine >= self-0.02) {
		t.Errorf("over 100ms of spinning, this process used %vs of CPU and the machine %vs", self, machine)
	}
}

func TestParseMachineBusy(t *testing.T) {
	const stat = "cpu  225492 10 46686 114288 769 5 1175 137 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n"
	busy, err := parseMachineBusy(stat)
	if err != nil {
		t.Fatal(err)
	}
	// user + nice + system + irq + softirq + steal, without idle and iowait, in hundredths of a second.
	if want := time.Duration(225492+10+46686+5+1175+137) * 10 * time.Millisecond; busy != want {
		t.Errorf("busy = %v, want %v", busy, want)
	}
	if _, err := parseMachineBusy("intr 1 2 3"); err == nil {
		t.Error("no error without a cpu line")
	}
}

func TestRequestCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	var counter requestCounter
	c := &http.Client{Transport: counter.wrap(http.DefaultTransport)}
	for range 3 {
		resp, err := c.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if n := counter.load(); n != 3 {
		t.Errorf("counted %d requests, want 3", n)
	}
}
