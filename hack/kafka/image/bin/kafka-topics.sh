#!/bin/bash
# Creates, lists and describes topics: Kafka's org.apache.kafka.tools.TopicCommand, as Kafka's own bin/kafka-topics.sh runs it.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.TopicCommand "$@"
