#!/usr/bin/env bash
# The release: the operator's and the sidecar's images for every platform, pushed to IMG_REPO as image
# indexes; an SBOM of each; the chart, pushed to CHART_REPO as an OCI artifact; all at the chart's
# appVersion. .github/workflows/release.yaml runs `publish` on a version tag, then signs provenance and
# SBOM attestations for the digests this script records.
#
# Usage: hack/release.sh check      the tag, the chart and the images it names agree (no network)
#        hack/release.sh publish    check, then build, push and record
# Env:   RELEASE_TAG      the git tag being released (default: the chart's appVersion)
#        IMG_REPO         where the images go (default: ghcr.io/sharestate, the chart's defaults)
#        CHART_REPO       where the chart goes (default: oci://IMG_REPO/charts)
#        PLATFORMS        the images' platforms (default: linux/amd64,linux/arm64)
#        OUT_DIR          the SBOMs, the packaged chart and release.env (default: bin/release)
#        HELM, SBOM_TOOL  the pinned tools (defaults: bin/helm, bin/cyclonedx-gomod)
#        HELM_PUSH_FLAGS  extra flags of `helm push` (a test's local registry: --plain-http)
# release.env (also appended to $GITHUB_OUTPUT when set) holds version, chart, chart_digest and, for
# each image, <name>_image, <name>_digest (its index) and <name>_<os>_<arch>_digest (each platform's
# image, which its SBOM describes), with _ for - in the name.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
chart_dir=charts/sharestate-operator
images=(sharestate-operator sharestate-sidecar) # each built from ./cmd/<name>
helm=${HELM:-$root/bin/helm}
sbom_tool=${SBOM_TOOL:-$root/bin/cyclonedx-gomod}
out_dir=${OUT_DIR:-$root/bin/release}
platforms=${PLATFORMS:-linux/amd64,linux/arm64}
default_repo=ghcr.io/sharestate

chart_field() { sed -n "s/^$1: *//p" "$chart_dir/Chart.yaml" | tr -d '"'; }
version=$(chart_field appVersion)
chart_version=$(chart_field version)
tag=${RELEASE_TAG:-$version}
img_repo=${IMG_REPO:-$default_repo}
chart_repo=${CHART_REPO:-oci://$img_repo/charts}

fail() {
  echo "release: $*" >&2
  exit 1
}

# check fails unless the tag is the chart's appVersion, which is "v" and the chart's version, and the
# chart, installed with its defaults, runs exactly the images this release pushes (the sidecar
# example's placeholder broker, apache/kafka, aside).
check() {
  [[ "$tag" == "$version" ]] || fail "the tag $tag is not the chart's appVersion $version ($chart_dir/Chart.yaml)"
  [[ "$version" == "v$chart_version" ]] || fail "the chart's appVersion $version is not v + its version $chart_version"
  local want got
  want=$(for name in "${images[@]}"; do echo "$default_repo/$name:$version"; done | sort)
  got=$("$helm" template sharestate "$chart_dir" --set sidecar.example.enabled=true |
    sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' | grep -v '^apache/kafka:' | sort -u)
  [[ "$got" == "$want" ]] || fail "the chart's defaults run"$'\n'"$got"$'\n'"but the release pushes"$'\n'"$want"
  check_readme "$want"
}

# check_readme fails unless the README's release block names the images and the chart a release
# publishes, at its version.
check_readme() {
  local block ref
  block=$(sed -n '/<!-- docs-test: release -->/,/^```$/p' README.md)
  for ref in $1 "oci://$default_repo/charts/sharestate-operator --version $chart_version"; do
    [[ "$block" == *"$ref"* ]] || fail "README.md's release block does not name $ref"
  done
}

# record appends key=value to release.env and, in a workflow, to the step's outputs.
record() {
  echo "$1=$2" >>"$out_dir/release.env"
  if [[ -n "${GITHUB_OUTPUT:-}" ]]; then echo "$1=$2" >>"$GITHUB_OUTPUT"; fi
}

# push_images builds and pushes each image's index of every platform with `make images`, and records
# the digests pushed (image-build writes "index DIGEST" and "OS/ARCH DIGEST" lines).
push_images() {
  local name key what digest specs=()
  for name in "${images[@]}"; do specs+=("$name=./cmd/$name"); done
  make --no-print-directory images IMAGE_PUSH=true IMAGE_PLATFORMS="$platforms" IMG_REPO="$img_repo" \
    IMG_TAG="$version" IMAGES_DIR="$out_dir/images" IMAGES="${specs[*]}"
  for name in "${images[@]}"; do
    key=${name//-/_}
    record "${key}_image" "$img_repo/$name"
    while read -r what digest; do
      if [[ "$what" == index ]]; then
        record "${key}_digest" "$digest"
      else
        record "${key}_${what//\//_}_digest" "$digest"
      fi
    done <"$out_dir/images/$name.digest"
  done
}

# write_sboms writes one CycloneDX SBOM per image and platform: the modules linked into its binary.
write_sboms() {
  local name plat plats
  IFS=, read -r -a plats <<<"$platforms"
  for name in "${images[@]}"; do
    for plat in "${plats[@]}"; do
      GOOS=${plat%/*} GOARCH=${plat#*/} CGO_ENABLED=0 "$sbom_tool" app -json -licenses \
        -output "$out_dir/sbom/$name.${plat//\//_}.cdx.json" -main "cmd/$name" .
    done
  done
}

# push_chart packages the chart and pushes it; helm prints the pushed manifest's digest.
push_chart() {
  local pkg out digest
  "$helm" package "$chart_dir" --destination "$out_dir" >/dev/null
  pkg=$out_dir/sharestate-operator-$chart_version.tgz
  # shellcheck disable=SC2086 # HELM_PUSH_FLAGS is a list of flags
  out=$("$helm" push "$pkg" "$chart_repo" ${HELM_PUSH_FLAGS:-} 2>&1) || fail "helm push: $out"
  digest=$(sed -n 's/^Digest: *//p' <<<"$out")
  [[ "$digest" == sha256:* ]] || fail "helm push printed no digest: $out"
  record chart "${chart_repo#oci://}/sharestate-operator"
  record chart_digest "$digest"
}

case "${1:-}" in
check) check ;;
publish)
  check
  rm -rf "$out_dir"
  mkdir -p "$out_dir/sbom"
  record version "$version"
  push_images
  write_sboms
  push_chart
  cat "$out_dir/release.env"
  ;;
*) fail "usage: hack/release.sh check|publish" ;;
esac
