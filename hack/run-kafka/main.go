// Command run-kafka runs the system with a real Apache Kafka for a developer (`make run-kafka`): a
// local control plane, the CRDs and the operator as `make run` starts them, and three Apache Kafka
// brokers (KRaft, on loopback) whose inter-broker listeners are fronted by sidecars in proxy mode, so
// that their share-group state goes to SharePartitionStates in namespace kafka. It creates a topic and
// points a share group at it, writes an environment file for the shell, prints how to produce,
// consume and watch the state, and runs until interrupted. Each run starts afresh: the run directory
// is emptied first, since the state is only meaningful with the Kafka data it goes with.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/sharestate/sharestate-operator/internal/operator"
	"github.com/sharestate/sharestate-operator/test/kafkacluster"
	"github.com/sharestate/sharestate-operator/test/localcluster"
)

// What run-kafka creates for the user to try.
const (
	namespace  = "kafka"
	topic      = "orders"
	group      = "orders-processors"
	partitions = 3
)

type options struct {
	runDir, crdDir, assets, sidecar, version string
}

func main() {
	var o options
	flags := flag.NewFlagSet("run-kafka", flag.ExitOnError)
	flags.StringVar(&o.runDir, "run-dir", ".run-kafka", "directory for the control plane's and the brokers' data, logs, kubeconfig and env file (emptied at start)")
	flags.StringVar(&o.crdDir, "crd-dir", "config/crd/bases", "directory of the CRD manifests to install")
	flags.StringVar(&o.assets, "kafka-assets", os.Getenv("KAFKA_ASSETS"), "directory of Kafka's jars (hack/kafka-assets.sh prints it)")
	flags.StringVar(&o.version, "kafka-version", kafkacluster.Version(), "the Kafka version of those jars, for the messages")
	flags.StringVar(&o.sidecar, "sidecar", "bin/sharestate-sidecar", "the sharestate-sidecar binary")
	zapOpts := zap.Options{Development: true}
	zapOpts.BindFlags(flags)
	_ = flags.Parse(os.Args[1:])
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "run-kafka:", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	var errs []error
	if o.assets == "" {
		errs = append(errs, errors.New("no Kafka jars: pass --kafka-assets, or run `make run-kafka`, which resolves them"))
	}
	if _, err := os.Stat(o.sidecar); err != nil {
		errs = append(errs, fmt.Errorf("the sidecar binary: %w (run `make run-kafka`, which builds it)", err))
	}
	return errors.Join(errs...)
}

func run(o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	giveBack := localcluster.TakeTerminal()
	defer giveBack()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	runDir, err := filepath.Abs(o.runDir)
	if err != nil {
		return err
	}
	cp, err := localcluster.StartContext(ctx, localcluster.Options{RunDir: runDir, CRDDir: o.crdDir, Fresh: true})
	if err != nil {
		return err
	}
	defer func() {
		if err := cp.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "run-kafka: stopping the control plane:", err)
		}
	}()
	operatorDone, err := startOperator(ctx, cp)
	if err != nil {
		return err
	}
	kafka, err := startKafka(ctx, o, cp, runDir)
	if err == nil {
		err = announce(ctx, o, cp, kafka, runDir)
		if err == nil {
			<-ctx.Done()
			fmt.Println("run-kafka: stopping")
		}
	}
	stop()
	if kafka != nil {
		kafka.Stop()
	}
	if opErr := <-operatorDone; opErr != nil {
		fmt.Fprintln(os.Stderr, "run-kafka: the operator stopped with an error:", opErr)
	}
	return err
}

// startOperator runs the operator in this process until ctx ends; its end goes to the channel.
func startOperator(ctx context.Context, cp *localcluster.Cluster) (<-chan error, error) {
	mgr, err := operator.NewManager(ctx, cp.Config, operator.Options{MetricsBindAddress: "0", HealthProbeBindAddress: "0"})
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return done, nil
}

// startKafka starts the brokers behind their sidecars, their Pod objects in namespace kafka.
func startKafka(ctx context.Context, o options, cp *localcluster.Cluster, runDir string) (*kafkacluster.Cluster, error) {
	c, err := client.New(cp.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	dir := filepath.Join(runDir, "kafka")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fmt.Printf("run-kafka: starting Apache Kafka %s (three brokers, their logs in %s)\n", o.version, dir)
	return kafkacluster.Start(kafkacluster.Options{
		Dir: dir, Assets: o.assets,
		Sidecars: &kafkacluster.SidecarOptions{Binary: o.sidecar, Kubeconfig: cp.KubeconfigPath, Client: c, Namespace: namespace},
	})
}

// announce creates the topic and the group, writes the env file and prints what to try.
func announce(ctx context.Context, o options, cp *localcluster.Cluster, kafka *kafkacluster.Cluster, runDir string) error {
	classes := filepath.Join(runDir, "classes")
	if err := os.MkdirAll(classes, 0o755); err != nil {
		return err
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	shareTool, err := kafkacluster.CompileShareTool(root, o.assets, classes)
	if err != nil {
		return err
	}
	clients := kafkacluster.Clients{Assets: o.assets, ShareTool: shareTool, Bootstrap: kafka.BootstrapServers(), Dir: runDir}
	setupCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if _, err := clients.Setup(setupCtx, topic, partitions, 3, group); err != nil {
		return err
	}
	env := filepath.Join(runDir, "env")
	lines := []string{
		"export KUBECONFIG=" + cp.KubeconfigPath,
		"export KAFKA_BOOTSTRAP=" + kafka.BootstrapServers(),
		"export KAFKA_CLASSPATH='" + kafkacluster.Classpath(o.assets) + "'",
	}
	if err := os.WriteFile(env, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Printf(`run-kafka: Apache Kafka %s runs on %s, each broker's inter-broker listener behind a sidecar
in proxy mode; their share-group state goes to SharePartitionStates in namespace %s.
Topic %s (%d partitions) and share group %s (reading from the earliest offset) are ready.
Try, in another shell:
  source %s
  seq 1 1000 | java -cp "$KAFKA_CLASSPATH" org.apache.kafka.tools.ConsoleProducer --bootstrap-server "$KAFKA_BOOTSTRAP" --topic %s
  java -cp "$KAFKA_CLASSPATH" org.apache.kafka.tools.consumer.ConsoleShareConsumer --bootstrap-server "$KAFKA_BOOTSTRAP" --topic %s --group %s
  kubectl get sps -n %s -w
Press Ctrl-C to stop.
`, o.version, kafka.BootstrapServers(), namespace, topic, partitions, group, env, topic, topic, group, namespace)
	return nil
}
