//go:build unix

package testenv

import (
	"flag"
	"syscall"
)

// keepFuzzPipesFromChildren marks the files a `go test -fuzz` worker gets from its coordinator (file
// descriptors 3, 4 and 5: its input and output pipes and the shared memory) close-on-exec, so that the
// processes a test starts (kube-apiserver, etcd, the binaries under test) do not inherit them. A child
// that held them and outlived a crashed worker would leave the coordinator waiting forever for the
// worker's pipes to close, instead of reporting the crash.
func keepFuzzPipesFromChildren() {
	if f := flag.Lookup("test.fuzzworker"); f == nil || f.Value.String() != "true" {
		return
	}
	for fd := 3; fd <= 5; fd++ {
		syscall.CloseOnExec(fd)
	}
}
