#!/usr/bin/env bash
# Builds the node's and the control plane's other Kubernetes commands, those a one-node cluster needs
# beside envtest's kube-apiserver and etcd (hack/envtest-assets.sh): kubelet, kube-controller-manager,
# kube-scheduler and kube-proxy, from the Go module proxy at the Kubernetes version go.mod pins, and
# CoreDNS, the cluster's DNS, at the version hack/tools/coredns pins; and prints the directory that
# holds them. Built once and cached outside the clone, keyed by version,
# like envtest's, so every clone and CI run reuses them (about 5 minutes on 2 cores the first time).
#
# Usage: hack/cluster-assets.sh            prints the assets directory (building it on first use)
# Env:   CLUSTER_CACHE_DIR                  cache root (default: ${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/cluster)
#        K8S_VERSION                        override the version derived from go.mod (e.g. 1.37.2)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=hack/lib/kube-build.sh
source "$root/hack/lib/kube-build.sh"
log() { printf 'cluster-assets: %s\n' "$*" >&2; }

commands=(kubelet kube-controller-manager kube-scheduler kube-proxy)
version=$(kube_version "$root")
cache_root=${CLUSTER_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/sharestate-operator/cluster}
assets="$cache_root/k8s-$version-$(go env GOOS)-$(go env GOARCH)"

coredns_mod="$root/hack/tools/coredns"
coredns_version=$(cat "$coredns_mod/go.mod" "$coredns_mod/main.go" | sha256sum | cut -c1-16)

built() {
  local c
  for c in "${commands[@]}"; do [[ -x "$assets/$c" ]] || return 1; done
  [[ -x "$assets/coredns" && "$(cat "$assets/coredns.version" 2>/dev/null)" == "$coredns_version" ]]
}

# build_coredns builds CoreDNS into the assets, stamped with the module it was built from.
build_coredns() {
  log "building CoreDNS (hack/tools/coredns; first run only; a few minutes)"
  (cd "$coredns_mod" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$assets/coredns.tmp" .)
  mv "$assets/coredns.tmp" "$assets/coredns"
  echo "$coredns_version" >"$assets/coredns.version"
}

if built; then echo "$assets"; exit 0; fi
mkdir -p "$cache_root"
kube_lock "$cache_root/.lock" "the cluster's Kubernetes $version commands"
if built; then echo "$assets"; exit 0; fi
kube_built() {
  local c
  for c in "${commands[@]}"; do [[ -x "$assets/$c" ]] || return 1; done
}
if kube_built; then build_coredns; echo "$assets"; exit 0; fi

work=$(mktemp -d "$cache_root/build.XXXXXX")
trap 'rm -rf "$work"' EXIT
log "building ${commands[*]} for Kubernetes $version (first run only; several minutes)"
kube_tools_module "$version" "$work" </dev/null
{
  echo "//go:build tools"
  echo
  echo "package tools"
  echo
  for c in "${commands[@]}"; do echo "import _ \"k8s.io/kubernetes/cmd/$c\""; done
} >"$work/tools.go"
(
  cd "$work"
  export GOFLAGS=-mod=mod CGO_ENABLED=0
  go mod tidy >&2
  ldflags=$(kube_ldflags "$version")
  for c in "${commands[@]}"; do
    go build -trimpath -ldflags "$ldflags" -o "$work/out/$c" "k8s.io/kubernetes/cmd/$c"
  done
)
rm -rf "$assets"
mv "$work/out" "$assets"
build_coredns
log "cached in $assets"
echo "$assets"
