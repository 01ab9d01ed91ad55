#!/usr/bin/env bash
# Builds the helm of hack/tools/helm/go.mod into $1 (default: bin/helm), stamped as helm's own release
# build stamps it: with its version (else `helm version` says only v3.22), and with the Kubernetes
# version of its client-go, which `helm template` and `helm lint` assume when no cluster is asked (else
# v1.20.0, older than the chart's kubeVersion, and the deprecation checks would be years out of date).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
out=${1:-$root/bin/helm}
modfile=$root/hack/tools/helm/go.mod

cd "$root"
versions=$(go list -modfile="$modfile" -m -f '{{.Version}}' helm.sh/helm/v3 k8s.io/client-go)
helm_version=$(sed -n 1p <<<"$versions")
client_go=$(sed -n 2p <<<"$versions")
# client-go v0.N.x is the client of Kubernetes v1.N.
kube_minor=$(cut -d. -f2 <<<"$client_go")

ldflags="-X helm.sh/helm/v3/internal/version.version=$helm_version"
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
	ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$kube_minor"
done
go build -modfile="$modfile" -ldflags="$ldflags" -o "$out" helm.sh/helm/v3/cmd/helm
