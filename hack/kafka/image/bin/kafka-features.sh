#!/bin/bash
# Describes and changes the cluster's feature versions: Kafka's org.apache.kafka.tools.FeatureCommand, as Kafka's own bin/kafka-features.sh runs it.
exec "$(dirname "$0")/kafka-run-class.sh" org.apache.kafka.tools.FeatureCommand "$@"
