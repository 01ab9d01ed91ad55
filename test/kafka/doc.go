// Package kafka tests the system with real Apache Kafka brokers (test/kafkacluster), Kafka's own
// share consumer and Kafka's own tools: `make test-kafka`, for the Kafka version KAFKA_VERSION names.
// Its tests carry the build tag kafka, so that `make test` does not start JVMs.
package kafka
