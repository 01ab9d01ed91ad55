//go:build !unix

package localcluster

import "syscall"

// childrenRunning finds nothing where there are no process groups to stop.
func childrenRunning(...string) []int { return nil }

func signalGroups([]int, syscall.Signal) {}
