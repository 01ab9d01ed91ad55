package main

import (
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestEnvtestsLoggerIsRenamed(t *testing.T) {
	var lines []string
	log := renamed(funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{}))
	// As controller-runtime builds envtest's logger, and another of its loggers.
	runtime := log.WithName("controller-runtime")
	runtime.WithName("test-env").WithValues("crd", "sharegroups").Info("installing CRD")
	runtime.WithName("metrics").Info("Starting metrics server")
	log.WithName("sidecar").WithName("health").Info("Kubernetes API server became reachable")
	want := []string{
		`local-control-plane "level"=0 "msg"="installing CRD" "crd"="sharegroups"`,
		`controller-runtime/metrics "level"=0 "msg"="Starting metrics server"`,
		`sidecar/health "level"=0 "msg"="Kubernetes API server became reachable"`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
