#!/bin/bash
# Produces the lines of stdin: Kafka's org.apache.kafka.tools.ConsoleProducer, as Kafka's own bin/kafka-console-producer.sh runs it.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.ConsoleProducer "$@"
