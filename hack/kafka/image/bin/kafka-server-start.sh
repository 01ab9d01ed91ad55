#!/bin/bash
# Starts a Kafka node on a server.properties, in the foreground, logging to stdout at INFO: a 1 GB
# heap unless KAFKA_HEAP_OPTS says otherwise, as Kafka's own bin/kafka-server-start.sh (apache/kafka
# at 01c427f5) defaults to.
#
# Usage: kafka-server-start.sh server.properties [--override property=value]...
[ $# -ge 1 ] || { echo "USAGE: $0 server.properties [--override property=value]*" >&2; exit 1; }
base_dir=$(cd "$(dirname "$0")/.." && pwd)
: "${KAFKA_HEAP_OPTS:=-Xmx1G -Xms1G}"
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/log4j2.yaml}"
export KAFKA_HEAP_OPTS KAFKA_LOG4J_OPTS
exec "$base_dir/bin/kafka-run-class.sh" kafka.Kafka "$@"
