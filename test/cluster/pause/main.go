// Command pause is every pod's sandbox process on the test cluster (containerd's sandbox_image): it
// holds the pod's namespaces and does nothing else. It behaves as Kubernetes' own pause container
// does (build/pause/linux/pause.c, kubernetes/kubernetes at 0b426b0b): SIGINT or SIGTERM end it with
// status 0, and it reaps the children it inherits as the pod's PID 1 when the pod shares one process
// namespace. It is built here because no registry is reachable to pull the real one from.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause (sharestate test cluster)")
		return
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintln(os.Stderr, "Shutting down, got signal:", sig)
		os.Exit(0)
	}
}

// reap collects every child that has ended, so that none stays a zombie.
func reap() {
	for {
		pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
