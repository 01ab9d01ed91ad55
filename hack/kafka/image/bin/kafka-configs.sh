#!/bin/bash
# Reads and changes dynamic configuration: Kafka's org.apache.kafka.tools.ConfigCommand, as Kafka's own bin/kafka-configs.sh runs it.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.ConfigCommand "$@"
