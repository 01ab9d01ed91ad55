#!/bin/bash
# Consumes a topic in a share group and prints its records: Kafka's org.apache.kafka.tools.consumer.ConsoleShareConsumer, as Kafka's own bin/kafka-console-share-consumer.sh runs it.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.consumer.ConsoleShareConsumer "$@"
