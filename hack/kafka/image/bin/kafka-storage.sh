#!/bin/bash
# Formats a node's log directories and prints cluster ids: Kafka's kafka.tools.StorageTool, as Kafka's own bin/kafka-storage.sh runs it.
exec "$(dirname "$0")/kafka-run-class.sh" kafka.tools.StorageTool "$@"
