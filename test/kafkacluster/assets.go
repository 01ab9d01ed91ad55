package kafkacluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultVersion is the Kafka version hack/kafka-assets.sh resolves when KAFKA_VERSION is not set.
const DefaultVersion = "4.4.0"

// Version is the Kafka version under test: KAFKA_VERSION, or DefaultVersion.
func Version() string {
	if v := os.Getenv("KAFKA_VERSION"); v != "" {
		return v
	}
	return DefaultVersion
}

// Assets resolves (once, cached) the jars of Kafka version with hack/kafka-assets.sh, run from the
// repository at root, and returns their directory. KAFKA_ASSETS, when set, names the directory
// instead.
func Assets(root, version string) (string, error) {
	if dir := os.Getenv("KAFKA_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join(root, "hack", "kafka-assets.sh"))
	cmd.Env = append(os.Environ(), "KAFKA_VERSION="+version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/kafka-assets.sh for Kafka %s: %w\n%s", version, err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// Java is the java launcher: $JAVA_HOME/bin/java when JAVA_HOME is set, else java on PATH.
func Java() string { return jdkTool("java") }

// Javac is the compiler beside Java.
func Javac() string { return jdkTool("javac") }

func jdkTool(name string) string {
	if home := os.Getenv("JAVA_HOME"); home != "" {
		return filepath.Join(home, "bin", name)
	}
	return name
}

// Classpath is the classpath of Kafka's jars in assets (a JVM wildcard), with extra entries first.
func Classpath(assets string, extra ...string) string {
	return strings.Join(append(extra, filepath.Join(assets, "*")), string(os.PathListSeparator))
}

// CompileShareTool compiles java/ShareTool.java (under root's test/kafkacluster) against the jars
// in assets into dir, and returns dir: the classpath entry of ShareTool.
func CompileShareTool(root, assets, dir string) (string, error) {
	src := filepath.Join(root, "test", "kafkacluster", "java", "ShareTool.java")
	cmd := exec.Command(Javac(), "-d", dir, "-cp", Classpath(assets), src)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("javac ShareTool.java: %w\n%s", err, out)
	}
	return dir, nil
}
