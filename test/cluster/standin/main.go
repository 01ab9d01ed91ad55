// Command standin is the broker container of the test cluster's stand-in broker pod: the stand-in
// broker of `make run` (localcluster.RunStandIn: a share group's coordinator and share-partition
// leader, without Kafka) calling the sidecar of its own pod on 127.0.0.1 over Kafka's protocol, as a
// broker's persister does. It reads its ShareGroup with the pod's service account. SIGTERM stops it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"

	"github.com/sharestate/sharestate-operator/test/localcluster"
)

func main() {
	group := flag.String("group", "", "the share group's id (required)")
	address := flag.String("sidecar", "127.0.0.1:9089", "the sidecar's Kafka-protocol listener")
	partitions := flag.Int("partitions", 4, "how many of the group's first topic's partitions it leads")
	interval := flag.Duration("interval", time.Second, "the time between two rounds of its consumer")
	flag.Parse()
	if err := run(*group, *address, int32(*partitions), *interval); err != nil {
		fmt.Fprintln(os.Stderr, "standin:", err)
		os.Exit(1)
	}
}

func run(group, address string, partitions int32, interval time.Duration) error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
	err = localcluster.RunStandIn(ctx, localcluster.StandInOptions{
		Config: cfg, Namespace: os.Getenv("POD_NAMESPACE"), GroupID: group, Partitions: partitions,
		Address: address, Interval: interval, Logger: log,
	})
	if ctx.Err() != nil {
		return nil // stopped by a signal: the kubelet ended the pod
	}
	return err
}
