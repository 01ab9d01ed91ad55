// Package kafkacluster runs a real Apache Kafka cluster for tests: KRaft nodes (broker and controller
// in one JVM each) started from the jars hack/kafka-assets.sh resolves from Maven Central, on
// loopback. With proxies, each broker's inter-broker listener is bound on loopback and fronted by its
// own sidecar in proxy mode, advertised at the proxy's address, as docs/kafka-integration.md §3 tells
// a user to configure it; each sidecar runs for a Pod object of its broker on a control plane the
// caller gives. Without them the brokers keep share-group state in Kafka's own __share_group_state.
//
// Kafka's own clients (KafkaShareConsumer, Admin, its tools) run as JVM processes too: ShareTool
// (java/ShareTool.java), compiled with javac against the same jars, and the tools' main classes.
package kafkacluster
