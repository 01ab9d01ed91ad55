#!/bin/bash
# Prints the partitions' offsets: Kafka's org.apache.kafka.tools.GetOffsetShell, as Kafka's own bin/kafka-get-offsets.sh runs it.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.GetOffsetShell "$@"
