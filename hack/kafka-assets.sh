#!/usr/bin/env bash
# Resolves a pinned Apache Kafka version's jars (the broker, its clients and its tools) from Maven
# Central with Maven, and prints the directory that holds them, the way hack/envtest-assets.sh does the
# control plane. No distribution tarball: the broker runs as `java -cp '<dir>/*' kafka.Kafka ...`.
# Cached outside the clone, keyed by version, resolved once under a lock.
#
# Usage: hack/kafka-assets.sh               prints the jars' directory (resolving it on first use)
# Env:   KAFKA_VERSION                      the Kafka version (default below: the newest tested)
#        KAFKA_CACHE_DIR                    cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/kafka)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { printf 'kafka-assets: %s\n' "$*" >&2; }

version=${KAFKA_VERSION:-4.4.0}
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { log "KAFKA_VERSION must be x.y.z (got '$version')"; exit 2; }
cache_root=${KAFKA_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/kafka}
assets="$cache_root/$version"

ready() { [[ -f "$assets/.complete" ]]; }
if ready; then echo "$assets"; exit 0; fi

command -v mvn >/dev/null || { log "mvn is not on PATH (Maven 3.8 or later resolves Kafka's jars)"; exit 1; }
mkdir -p "$cache_root"
# One resolver at a time: parallel test runs in other clones wait here instead of racing.
exec 9>"$cache_root/.lock"
if ! flock --nonblock 9; then
  log "another resolution of Kafka $version holds $cache_root/.lock; waiting for it"
  flock 9
fi
if ready; then echo "$assets"; exit 0; fi

work=$(mktemp -d "$cache_root/resolve.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "resolving Apache Kafka $version from Maven Central (first run only; about a minute)"
sed "s/@KAFKA_VERSION@/$version/" "$root/hack/kafka/pom.xml" >"$work/pom.xml"
mvn -B -q -f "$work/pom.xml" dependency:copy-dependencies \
  -DincludeScope=runtime -DoutputDirectory="$work/out" >&2
ls "$work/out"/kafka_2.13-"$version".jar >/dev/null || { log "the broker's jar kafka_2.13-$version.jar was not resolved"; exit 1; }
touch "$work/out/.complete"
rm -rf "$assets"
mv "$work/out" "$assets"
log "cached in $assets"
echo "$assets"
