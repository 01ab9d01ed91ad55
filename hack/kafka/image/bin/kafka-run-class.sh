#!/bin/bash
# Runs a Java main class of Kafka's on every jar of /opt/kafka/libs, with the JVM settings Kafka's own
# bin/kafka-run-class.sh defaults to (apache/kafka at 0194da2950423e2cb69a4d8d7c7d483b871f9307): a
# 256 MB heap unless KAFKA_HEAP_OPTS says otherwise, G1 with a 20 ms pause goal, headless. The
# variables it reads are Kafka's: KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_OPTS,
# KAFKA_OPTS, JAVA_HOME. Written for the test cluster's image, since Maven Central ships Kafka's jars
# without its scripts.
#
# Usage: kafka-run-class.sh CLASS [ARGS...]
set -e
[ $# -ge 1 ] || { echo "USAGE: $0 classname [opts]" >&2; exit 1; }
base_dir=$(cd "$(dirname "$0")/.." && pwd)
java=java
[ -z "$JAVA_HOME" ] || java=$JAVA_HOME/bin/java
: "${KAFKA_HEAP_OPTS:=-Xmx256M}"
: "${KAFKA_JVM_PERFORMANCE_OPTS:=-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true}"
# A tool logs warnings to stderr, so that what it prints on stdout is its answer alone.
: "${KAFKA_LOG4J_OPTS:=-Dlog4j2.configurationFile=$base_dir/config/tools-log4j2.yaml}"
# shellcheck disable=SC2086 # the options are lists of words, as in Kafka's script
exec "$java" $KAFKA_HEAP_OPTS $KAFKA_JVM_PERFORMANCE_OPTS $KAFKA_LOG4J_OPTS -cp "$base_dir/libs/*" $KAFKA_OPTS "$@"
