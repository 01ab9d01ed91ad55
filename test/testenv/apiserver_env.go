package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// envtest starts kube-apiserver with this process's environment and no way to add to it
// (sigs.k8s.io/controller-runtime v0.25.2, pkg/internal/testing/process/process.go, State.Start builds
// its exec.Cmd from the path and the arguments alone). To give kube-apiserver variables of its own, and not etcd or
// this process, it is started through a script that execs it with them: exec keeps the process id, so
// envtest still stops kube-apiserver itself.

// envAssignment is a variable assignment: a name a shell accepts, then "=".
var envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// CheckAPIServerEnv refuses an assignment of Options.APIServerEnv that is not NAME=value.
func CheckAPIServerEnv(env []string) error {
	for _, kv := range env {
		if !envAssignment.MatchString(kv) {
			return fmt.Errorf("kube-apiserver environment %q: want NAME=value, NAME of letters, digits and _", kv)
		}
	}
	return nil
}

// apiserverWrapper is a shell script that runs binary with env added to its environment and the
// script's arguments.
func apiserverWrapper(binary string, env []string) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\nexec env")
	for _, kv := range env {
		b.WriteString(" " + shellQuote(kv))
	}
	b.WriteString(" " + shellQuote(binary) + ` "$@"` + "\n")
	return b.String()
}

// shellQuote quotes s for a POSIX shell: in single quotes, each single quote of s closed, escaped
// and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeAPIServerWrapper writes the wrapper of the kube-apiserver of KUBEBUILDER_ASSETS into a new
// directory and returns the script's path and the directory, which the caller removes once the
// control plane has stopped.
func writeAPIServerWrapper(env []string) (path, dir string, err error) {
	if err := CheckAPIServerEnv(env); err != nil {
		return "", "", err
	}
	binary := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kube-apiserver")
	if _, err := os.Stat(binary); err != nil {
		return "", "", fmt.Errorf("kube-apiserver of KUBEBUILDER_ASSETS: %w", err)
	}
	dir, err = os.MkdirTemp("", "sharestate-apiserver-")
	if err != nil {
		return "", "", err
	}
	path = filepath.Join(dir, "kube-apiserver")
	if err := os.WriteFile(path, []byte(apiserverWrapper(binary, env)), 0o755); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", err
	}
	return path, dir, nil
}
