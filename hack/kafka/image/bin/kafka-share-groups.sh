#!/bin/bash
# Lists, describes, resets and deletes share groups: Kafka's org.apache.kafka.tools.consumer.group.ShareGroupCommand, as Kafka's own bin/kafka-share-groups.sh runs it.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.consumer.group.ShareGroupCommand "$@"
