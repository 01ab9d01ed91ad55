# Shared by hack/envtest-assets.sh and hack/cluster-assets.sh, which build Kubernetes' own commands
# from the Go module proxy (release tarballs cannot be fetched here) and cache them outside the clone.
# Source it; it defines functions only.

# kube_version prints the Kubernetes version go.mod pins (k8s.io/api vX.Y.Z pins Kubernetes 1.Y.Z), or
# $K8S_VERSION when set.
kube_version() {
  local root=$1 api
  if [[ -n "${K8S_VERSION:-}" ]]; then echo "$K8S_VERSION"; return; fi
  api=$(go mod edit -json "$root/go.mod" | awk -F'"' '/"Path": "k8s.io\/api"/ { getline; print $4; exit }')
  [[ "$api" =~ ^v0\.([0-9]+)\.([0-9]+)$ ]] || { echo "cannot read the k8s.io/api version from go.mod (got '$api')" >&2; return 1; }
  echo "1.${BASH_REMATCH[1]}.${BASH_REMATCH[2]}"
}

# kube_lock takes the lock file $1 on file descriptor 9, saying why it waits when another build holds it:
# parallel runs in other clones wait for one build instead of racing.
kube_lock() {
  local lock=$1 what=$2
  exec 9>"$lock"
  if ! flock --nonblock 9; then
    echo "another build of $what holds $lock; waiting for it to finish (several minutes from its start) to use what it builds" >&2
    flock 9
  fi
}

# kube_tools_module writes, into directory $2, a go.mod that requires k8s.io/kubernetes at version $1
# and the extra modules "path version" given on stdin. k8s.io/kubernetes replaces its staging modules
# with local paths that do not exist outside its repository, so each one is pointed at the published
# module of the matching version. It prints nothing; it fails when the version cannot be downloaded.
kube_tools_module() {
  local version=$1 dir=$2 kmod go_directive staging_version="v0.${1#1.}"
  kmod=$(go mod download -json "k8s.io/kubernetes@v$version" | awk -F'"' '/"GoMod":/ { print $4 }')
  [[ -f "$kmod" ]] || { echo "could not download k8s.io/kubernetes@v$version" >&2; return 1; }
  go_directive=$(awk '$1 == "go" { print $2; exit }' "$kmod")
  {
    echo "module sharestate.dev/kube-assets"
    echo
    echo "go $go_directive"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes v$version"
    while read -r path mod_version; do [[ -n "$path" ]] && echo "	$path $mod_version"; done
    echo ")"
    echo
    echo "replace ("
    awk -v v="$staging_version" '$2 == "=>" && $3 ~ /^\.\/staging\// { printf "\t%s => %s %s\n", $1, $1, v }' "$kmod"
    echo ")"
  } >"$dir/go.mod"
}

# kube_module_version prints the version of module $2 that k8s.io/kubernetes@v$1 requires.
kube_module_version() {
  local kmod
  kmod=$(go mod download -json "k8s.io/kubernetes@v$1" | awk -F'"' '/"GoMod":/ { print $4 }')
  awk -v m="$2" '$1 == m { print $2; exit }' "$kmod"
}

# kube_ldflags prints the -ldflags that stamp version $1 the way Kubernetes' release build does, so
# that discovery and `--version` report v$1.
kube_ldflags() {
  local version=$1 pkg=k8s.io/component-base/version minor
  minor=${version#1.}; minor=${minor%%.*}
  echo "-X $pkg.gitVersion=v$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
}
