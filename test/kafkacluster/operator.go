package kafkacluster

import "time"

// Operator is a running sharestate-operator, watching one namespace, beside a cluster's sidecars.
type Operator struct{ proc process }

// StartOperator starts binary against the API server kubeconfig reaches, watching namespace, its
// output in logPath; it serves no metrics or probes (tests read the objects it writes).
func StartOperator(binary, kubeconfig, namespace, logPath string) (*Operator, error) {
	o := &Operator{proc: process{name: "operator", logPath: logPath}}
	if err := o.proc.start(nil, binary, "--kubeconfig", kubeconfig, "--watch-namespace", namespace,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"); err != nil {
		return nil, err
	}
	return o, nil
}

// PID is the operator's process id: for its CPU time.
func (o *Operator) PID() int { return o.proc.pid() }

// Stop asks the operator to stop (SIGTERM) and kills it if it has not within 10 s.
func (o *Operator) Stop() { o.proc.stop(10 * time.Second) }
