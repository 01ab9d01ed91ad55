#!/usr/bin/env bash
# Builds the test cluster's Apache Kafka images without a container engine or a registry, laid out as
# the apache/kafka image is (docs/kafka-integration.md, K17): Kafka in /opt/kafka, its data in
# /var/lib/kafka/data, run as the non-root `appuser` (1000:1000). Two layers:
#   - a root filesystem of Debian's packages, a JRE 17 and a shell (mmdebstrap, as root), cached;
#   - Kafka's jars from Maven Central (hack/kafka-assets.sh) with the scripts of hack/kafka/image,
#     written here because Maven Central ships the jars without Kafka's bin/ and config/.
# and two images of them, written as docker-save archives:
#   OUT_DIR/kafka.tar          localhost/sharestate/kafka:VERSION, the broker (§4's image)
#   OUT_DIR/kafka-clients.tar  localhost/sharestate/kafka-clients:VERSION, the same and the tests'
#                              ShareTool (test/kafkacluster/java) as /opt/kafka/libs/sharetool.jar
# The archives are cached, keyed by everything they are made of.
#
# Usage: hack/kafka-image.sh OUT_DIR
# Env:   KAFKA_VERSION          the Kafka version (default: hack/kafka-assets.sh's)
#        IMAGE_BUILD            the image builder (default: bin/image-build)
#        KAFKA_IMAGE_CACHE_DIR  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/kafka-image)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { printf 'kafka-image: %s\n' "$*" >&2; }
out_dir=${1:?usage: hack/kafka-image.sh OUT_DIR}
builder=${IMAGE_BUILD:-$root/bin/image-build}
cache_root=${KAFKA_IMAGE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/kafka-image}

# The root filesystem: Debian's release of this machine's kind, essential packages, a headless JRE,
# bash (Kafka's scripts) and procps. Documentation and translations are left out; the manual pages
# are not, since the JRE's postinst registers its alternatives through them.
suite=bookworm
packages=openjdk-17-jre-headless,bash,procps
# The cache key is everything the root filesystem is made of: the suite, the packages and
# build_base's own lines (its hooks).
base_key=$({ printf '%s\n' "$suite" "$packages"; sed -n '/^build_base() {/,/^}/p' "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-16)

jars=$("$root/hack/kafka-assets.sh")
version=$(basename "$jars")
mkdir -p "$cache_root" "$out_dir"
exec 9>"$cache_root/.lock"
if ! flock --nonblock 9; then
  log "another build holds $cache_root/.lock; waiting for it"
  flock 9
fi

base="$cache_root/base-$suite-$base_key.tar.gz"
build_base() {
  command -v mmdebstrap >/dev/null || { log "mmdebstrap is not installed (apt-get install mmdebstrap)"; return 1; }
  [[ $(id -u) == 0 ]] || { log "the root filesystem is built as root (mmdebstrap --mode=root)"; return 1; }
  log "building the $suite root filesystem ($packages; about a minute, first run only)"
  local tmp="$base.tmp"
  # appuser and its group, as apache/kafka's image makes them; the data directory is its own.
  mmdebstrap --quiet --variant=essential --mode=root --include="$packages" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --customize-hook='echo "appuser:x:1000:1000::/home/appuser:/bin/bash" >>"$1/etc/passwd"' \
    --customize-hook='echo "appuser:x:1000:" >>"$1/etc/group"' \
    --customize-hook='mkdir -p "$1/home/appuser" "$1/var/lib/kafka/data" "$1/opt/kafka"' \
    --customize-hook='chown 1000:1000 "$1/home/appuser" "$1/var/lib/kafka/data"' \
    --customize-hook='rm -rf "$1/var/cache/apt" "$1/var/lib/apt/lists"' \
    "$suite" - | gzip -1 >"$tmp"
  mv "$tmp" "$base"
}
[[ -f "$base" ]] || build_base

# The Kafka layer: /opt/kafka/{bin,config,libs}, owned by root and readable by all.
kafka_key=$({ echo "$version $base_key"; ls "$jars"; cat "$root"/hack/kafka/image/*/*; } | sha256sum | cut -c1-16)
kafka_layer="$cache_root/kafka-$version-$kafka_key.tar"
clients_layer="$cache_root/clients-$version-$kafka_key-$(sha256sum "$root/test/kafkacluster/java/ShareTool.java" | cut -c1-16).tar"
make_layer() { # DIR LAYER: the tree under DIR as a layer, the same bytes from the same files
  tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$1" -cf "$2.tmp" opt
  mv "$2.tmp" "$2"
}
if [[ ! -f "$kafka_layer" ]]; then
  stage=$(mktemp -d)
  mkdir -p "$stage/opt/kafka/libs"
  cp -r "$root/hack/kafka/image/bin" "$root/hack/kafka/image/config" "$stage/opt/kafka/"
  cp "$jars"/*.jar "$stage/opt/kafka/libs/"
  chmod -R a+rX "$stage/opt"
  make_layer "$stage" "$kafka_layer"
  rm -rf "$stage"
fi
if [[ ! -f "$clients_layer" ]]; then
  stage=$(mktemp -d)
  mkdir -p "$stage/classes" "$stage/opt/kafka/libs"
  javac -d "$stage/classes" -cp "$jars/*" "$root/test/kafkacluster/java/ShareTool.java"
  jar --create --file "$stage/opt/kafka/libs/sharetool.jar" -C "$stage/classes" .
  chmod -R a+rX "$stage/opt"
  make_layer "$stage" "$clients_layer"
  rm -rf "$stage"
fi

# image NAME LAYER...: OUT_DIR/NAME.tar, from the cache when its layers are those cached.
image() {
  local name=$1 key cached
  shift
  key=$(printf '%s\n' "$@" | sha256sum | cut -c1-16)
  cached="$cache_root/$name-$version-$key.image.tar"
  if [[ ! -f "$cached" ]]; then
    local args=()
    for layer in "$@"; do args+=(--layer "$layer"); done
    "$builder" "${args[@]}" --user 1000:1000 --workdir /opt/kafka \
      --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --cmd /bin/bash \
      --label "org.opencontainers.image.version=$version" \
      --tag "localhost/sharestate/$name:$version" --out "$cached.tmp"
    mv "$cached.tmp" "$cached"
  fi
  cp "$cached" "$out_dir/$name.tar"
  log "$out_dir/$name.tar: localhost/sharestate/$name:$version"
}
image kafka "$base" "$kafka_layer"
image kafka-clients "$base" "$kafka_layer" "$clients_layer"
