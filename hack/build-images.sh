#!/usr/bin/env bash
# Builds images of the project's static binaries without a container engine: each package is built
# with CGO off for every platform, then bin/image-build (hack/tools/images) lays the binary on a
# distroless-like base, as the Dockerfile does, and writes OUT_DIR/<name>.tar (one platform) or
# pushes an index of every platform (PUSH=true; credentials from ~/.docker/config.json).
#
# Usage: hack/build-images.sh NAME=PACKAGE...     e.g. sharestate-operator=./cmd/sharestate-operator
# Env:   IMG_REPO, IMG_TAG      the images are IMG_REPO/NAME:IMG_TAG
#        PLATFORMS              comma-separated OS/ARCH (default: the host's)
#        OUT_DIR                where archives and binaries go (default: bin/images)
#        PUSH                   true: push instead of writing archives, and write each index's
#                               digest to OUT_DIR/<name>.digest
#        IMAGE_BUILD            the builder (default: bin/image-build)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
: "${IMG_REPO:?}" "${IMG_TAG:?}"
platforms=${PLATFORMS:-linux/$(go env GOARCH)}
out_dir=${OUT_DIR:-$root/bin/images}
builder=${IMAGE_BUILD:-$root/bin/image-build}
push=${PUSH:-false}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
IFS=, read -r -a plats <<<"$platforms"
if [[ "$push" != true && ${#plats[@]} -ne 1 ]]; then
  echo "build-images: archives hold one platform; $platforms needs PUSH=true" >&2
  exit 2
fi

for spec in "$@"; do
  name=${spec%%=*} pkg=${spec#*=}
  args=()
  for plat in "${plats[@]}"; do
    bin="$out_dir/${plat//\//_}/$name"
    GOOS=${plat%/*} GOARCH=${plat#*/} CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$bin" "$pkg"
    args+=(--binary "$plat=$bin")
  done
  args+=(--tag "$IMG_REPO/$name:$IMG_TAG"
    --label "org.opencontainers.image.source=https://github.com/sharestate/sharestate-operator"
    --label "org.opencontainers.image.version=$IMG_TAG"
    --label "org.opencontainers.image.revision=$revision")
  if [[ "$push" == true ]]; then
    "$builder" "${args[@]}" --push --digest-file "$out_dir/$name.digest"
    echo "pushed $IMG_REPO/$name:$IMG_TAG ($platforms)" >&2
  else
    "$builder" "${args[@]}" --out "$out_dir/$name.tar"
    echo "$out_dir/$name.tar: $IMG_REPO/$name:$IMG_TAG ($platforms)" >&2
  fi
done
