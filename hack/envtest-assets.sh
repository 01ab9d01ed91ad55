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
log() { printf 'envtest-assets: %s\n' "$*" >&2; }

# k8s.io/api vX.Y.Z pins Kubernetes 1.Y.Z.
k8s_version() {
  if [[ -n "${K8S_VERSION:-}" ]]; then echo "$K8S_VERSION"; return; fi
  local api
  api=$(go mod edit -json "$root/go.mod" | awk -F'"' '/"Path": "k8s.io\/api"/ { getline; print $4; exit }')
  [[ "$api" =~ ^v0\.([0-9]+)\.([0-9]+)$ ]] || { log "cannot read the k8s.io/api version from go.mod (got '$api')"; exit 1; }
  echo "1.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
}

version=$(k8s_version)
staging_version="v0.${version#1.}"
cache_root=${ENVTEST_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/envtest}
assets="$cache_root/k8s-$version-$(go env GOOS)-$(go env GOARCH)"

if [[ -x "$assets/kube-apiserver" && -x "$assets/etcd" && -x "$assets/kubectl" ]]; then
  echo "$assets"
  exit 0
fi

mkdir -p "$cache_root"
# One builder at a time: parallel `make test` runs in other clones wait here instead of racing.
exec 9>"$cache_root/.lock"
if ! flock --nonblock 9; then
  log "another build of kube-apiserver and etcd for Kubernetes $version holds $cache_root/.lock;" \
    "waiting for it to finish (several minutes from its start) to use what it builds"
  flock 9
fi
if [[ -x "$assets/kube-apiserver" && -x "$assets/etcd" && -x "$assets/kubectl" ]]; then
  echo "$assets"
  exit 0
fi

work=$(mktemp -d "$cache_root/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building kube-apiserver and etcd for Kubernetes $version (first run only; several minutes)"

# The tools module: k8s.io/kubernetes replaces its staging modules with local paths that do not exist
# outside its repository, so we point each one at the published module of the matching version.
kmod=$(go mod download -json "k8s.io/kubernetes@v$version" | awk -F'"' '/"GoMod":/ { print $4 }')
[[ -f "$kmod" ]] || { log "could not download k8s.io/kubernetes@v$version"; exit 1; }
etcd_version=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2; exit }' "$kmod")
go_directive=$(awk '$1 == "go" { print $2; exit }' "$kmod")
{
  echo "module sharestate.dev/envtest-assets"
  echo
  echo "go $go_directive"
  echo
  echo "require ("
  echo "	k8s.io/kubernetes v$version"
  echo "	go.etcd.io/etcd/server/v3 $etcd_version"
  echo ")"
  echo
  echo "replace ("
  awk -v v="$staging_version" '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s %s\n", $1, $1, v }' "$kmod"
  echo ")"
} >"$work/go.mod"
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
  # Stamp the version the way Kubernetes' release build does, so discovery reports v$version.
  pkg=k8s.io/component-base/version
  minor=${version#1.}; minor=${minor%%.*}
  ldflags="-X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  go build -trimpath -ldflags "$ldflags" -o "$work/out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
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
