package kafkacluster

import (
	"os"
	"os/exec"
	"time"
)

// Operator is a running sharestate-operator, watching one namespace, beside a cluster's sidecars.
type Operator struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it has exited
}

// StartOperator starts binary against the API server kubeconfig reaches, watching namespace, its
// output in logPath; it serves no metrics or probes (tests read the objects it writes).
func StartOperator(binary, kubeconfig, namespace, logPath string) (*Operator, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "--kubeconfig", kubeconfig, "--watch-namespace", namespace,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	o := &Operator{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); _ = logFile.Close(); close(o.done) }()
	return o, nil
}

// PID is the operator's process id: for its CPU time.
func (o *Operator) PID() int { return o.cmd.Process.Pid }

// Stop asks the operator to stop (SIGINT) and kills it if it has not within 10 s.
func (o *Operator) Stop() {
	_ = o.cmd.Process.Signal(os.Interrupt)
	select {
	case <-o.done:
	case <-time.After(10 * time.Second):
		_ = o.cmd.Process.Kill()
		<-o.done
	}
}
