package bench

import (
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"sync"
	"time"
)

// kafkaReport prints the kafka family's figures as they are measured, one line each, and its
// targets with their verdicts at the end. Every line carries the machine's load average, as the
// other scenarios' lines carry the CPU the machine's other processes used.
type kafkaReport struct {
	mu     sync.Mutex
	out    io.Writer
	checks []kafkaCheck
}

// kafkaCheck is one target: a measured ratio against a bound.
type kafkaCheck struct {
	name   string
	value  float64 // NaN when not measured
	atMost bool    // the bound is an upper one
	bound  float64
	unit   string // "×" for ratios, or the figure's unit
	note   string // why it was not measured, or what it was measured on
}

func newKafkaReport(out io.Writer) *kafkaReport { return &kafkaReport{out: out} }

func (r *kafkaReport) header(version string, controlPlaneCPUs []int) {
	fmt.Fprintf(r.out, "\n# kafka: against Kafka's own persister, Apache Kafka %s, %s\n", version, time.Now().UTC().Format(time.RFC3339))
	if len(controlPlaneCPUs) > 0 {
		fmt.Fprintf(r.out, "# kube-apiserver and etcd on CPUs %v, everything else on CPUs %v\n", controlPlaneCPUs, otherCPUs(controlPlaneCPUs))
	}
}

// line prints one measurement: its family, then key=value figures, then the load.
func (r *kafkaReport) line(family string, figures ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "kafka=%s", family)
	for i := 0; i+1 < len(figures); i += 2 {
		fmt.Fprintf(&b, " %v=%s", figures[i], formatFigure(figures[i+1]))
	}
	fmt.Fprintf(&b, " load1=%s", loadAverage())
	fmt.Fprintln(r.out, b.String())
}

func formatFigure(v any) string {
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) {
			return "n/a"
		}
		if math.Abs(x) >= 100 {
			return fmt.Sprintf("%.0f", x)
		}
		return fmt.Sprintf("%.3g", x)
	case time.Duration:
		return fmt.Sprintf("%.2fs", x.Seconds())
	default:
		return fmt.Sprint(v)
	}
}

// check records a target: value against bound (at least, or at most).
func (r *kafkaReport) check(name string, value float64, atMost bool, bound float64, unit, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = append(r.checks, kafkaCheck{name: name, value: value, atMost: atMost, bound: bound, unit: unit, note: note})
}

// failure records a family that could not be measured.
func (r *kafkaReport) failure(family string, err error) {
	r.check(family, math.NaN(), false, 0, "", "ERROR: "+firstLine(err.Error()))
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// targets prints every target with its verdict.
func (r *kafkaReport) targets() {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "\n| kafka target | measured | target | verdict |\n| --- | ---: | ---: | --- |\n")
	for _, c := range r.checks {
		fmt.Fprintf(r.out, "| %s | %s | %s | %s |\n", c.name, c.measured(), c.target(), c.verdict())
	}
}

func (c kafkaCheck) measured() string {
	if math.IsNaN(c.value) {
		return "n/a"
	}
	return fmt.Sprintf("%.3g%s", c.value, c.unit)
}

func (c kafkaCheck) target() string {
	if c.bound == 0 {
		return "figure"
	}
	op := "≥"
	if c.atMost {
		op = "≤"
	}
	return fmt.Sprintf("%s %.3g%s", op, c.bound, c.unit)
}

func (c kafkaCheck) verdict() string {
	switch {
	case strings.HasPrefix(c.note, "ERROR"):
		return c.note
	case math.IsNaN(c.value):
		return "SKIP " + c.note
	case c.bound == 0:
		return strings.TrimSpace("INFO " + c.note)
	case c.atMost && c.value <= c.bound, !c.atMost && c.value >= c.bound:
		return strings.TrimSpace("PASS " + c.note)
	default:
		return strings.TrimSpace("MISS " + c.note)
	}
}

// loadAverage is the machine's one-minute load average, from /proc/loadavg ("?" where unreadable).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		return "?"
	}
	return fields[0]
}

// procSample is the CPU seconds and resident memory of a set of processes at one moment.
type procSample struct {
	at  time.Time
	cpu []float64 // seconds, by process; NaN if unreadable
}

func sampleProcs(pids []int) procSample {
	s := procSample{at: time.Now(), cpu: make([]float64, len(pids))}
	for i, pid := range pids {
		cpu, err := readCPU(pid)
		if err != nil || pid == 0 {
			s.cpu[i] = math.NaN()
			continue
		}
		s.cpu[i] = cpu.Seconds()
	}
	return s
}

// cpuSeconds is the CPU the processes used between two samples, summed.
func cpuSeconds(before, after procSample) float64 {
	sum := 0.0
	for i := range before.cpu {
		sum += after.cpu[i] - before.cpu[i]
	}
	return sum
}

// rssMB is the resident memory of pid in MB (VmRSS in /proc/<pid>/status), NaN if unreadable.
func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return math.NaN()
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb float64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return math.NaN()
}
