#!/usr/bin/env bash
# Builds the control-plane binaries envtest needs (kube-apiserver, etcd) from the Go module proxy, for the
# Kubernetes version that go.mod pins, and prints the directory that holds them together with kubectl,
# the way `setup-envtest use -p path` does. setup-envtest downloads release tarballs, which cannot be
# fetched here; the module proxy can, so we build from source once and cache the result outside the
# clone, keyed by version, so every clone and every CI run reuses it.
#
# Usage: hack/envtest-assets.sh            prints the assets directory (building it on first use)
# Env:   ENVTEST_CACHE_DIR                  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/envtest)
#        K8S_VERSION                        override the version derived from go.mod (e.g. 1.37.2)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/kube-build.sh
source "$root/hack/lib/kube-build.sh"
log() { printf 'envtest-assets: %s\n' "$*" >&2; }

version=$(kube_version "$root")
cache_root=${ENVTEST_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/envtest}
assets="$cache_root/k8s-$version-$(go env GOOS)-$(go env GOARCH)"

if [[ -x "$assets/kube-apiserver" && -x "$assets/etcd" && -x "$assets/kubectl" ]]; then
  echo "$assets"
  exit 0
fi

mkdir -p "$cache_root"
kube_lock "$cache_root/.lock" "kube-apiserver and etcd for Kubernetes $version"
if [[ -x "$assets/kube-apiserver" && -x "$assets/etcd" && -x "$assets/kubectl" ]]; then
  echo "$assets"
  exit 0
fi

work=$(mktemp -d "$cache_root/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building kube-apiserver and etcd for Kubernetes $version (first run only; several minutes)"
echo "go.etcd.io/etcd/server/v3 $(kube_module_version "$version" go.etcd.io/etcd/server/v3)" | kube_tools_module "$version" "$work"
mkdir -p "$work/etcd"
cat >"$work/etcd/main.go" <<'GO'
// Command etcd is etcd's own main, built from the module proxy for envtest.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
# go mod tidy keeps a module only if something imports it: name the commands we build.
cat >"$work/tools.go" <<'GO'
//go:build tools

package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
GO

(
  cd "$work"
  export GOFLAGS=-mod=mod CGO_ENABLED=0
  go mod tidy >&2
  go build -trimpath -o "$work/out/etcd" ./etcd
  # Stamped with the version, so that discovery reports v$version.
  go build -trimpath -ldflags "$(kube_ldflags "$version")" -o "$work/out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
)

# kubectl: the one on PATH when there is one, else built from the same version.
if kubectl_path=$(command -v kubectl); then
  ln -s "$kubectl_path" "$work/out/kubectl"
else
  log "no kubectl on PATH; building it"
  (cd "$work" && GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -o "$work/out/kubectl" k8s.io/kubernetes/cmd/kubectl)
fi

rm -rf "$assets"
mv "$work/out" "$assets"
log "cached in $assets"
echo "$assets"
