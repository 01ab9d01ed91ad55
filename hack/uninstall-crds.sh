#!/usr/bin/env bash
# Removes the sharestate CRDs from the cluster kubectl talks to, and with them every ShareGroup and
# SharePartitionState, whether or not an operator still runs.
#
# Each ShareGroup carries the finalizer sharestate.dev/partition-state, with which the operator deletes
# the group's SharePartitionStates before the group goes. Deleting both CRDs at once hangs: without an
# operator nothing removes the finalizer, so the ShareGroup CRD stays Terminating for ever. So:
#   1. the SharePartitionState CRD goes first; the API server deletes every SharePartitionState with it
#      (they carry no finalizer) and kubectl waits for that;
#   2. the ShareGroup CRD is deleted, which marks every ShareGroup for deletion;
#   3. the finalizer has nothing left to delete, so it is removed from each ShareGroup that still has
#      it. A running operator does the same by itself (a missing SharePartitionState kind means no
#      state is left); without one, this step is what lets the ShareGroups, and their CRD, go.
# Other finalizers a ShareGroup may carry are left alone.
#
# Usage: hack/uninstall-crds.sh      (make uninstall)
# Env:   KUBECTL       the kubectl to run (default: kubectl)
#        TIMEOUT_SECONDS   how long to wait for the ShareGroup CRD to go (default: 120)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kubectl=${KUBECTL:-kubectl}
timeout=${TIMEOUT_SECONDS:-120}
finalizer=sharestate.dev/partition-state
crds=$root/config/crd/bases
log() { printf 'uninstall: %s\n' "$*" >&2; }

log "deleting the SharePartitionState CRD and every SharePartitionState"
"$kubectl" delete --ignore-not-found -f "$crds/sharestate.dev_sharepartitionstates.yaml"

if ! "$kubectl" get crd sharegroups.sharestate.dev >/dev/null 2>&1; then
  log "the ShareGroup CRD is not installed"
  exit 0
fi
log "deleting the ShareGroup CRD and every ShareGroup"
"$kubectl" delete --wait=false -f "$crds/sharestate.dev_sharegroups.yaml"

# Prints "<namespace> <name> <index>" for every ShareGroup that still has the finalizer at <index>.
with_finalizer() {
  "$kubectl" get sharegroups.sharestate.dev --all-namespaces --ignore-not-found -o go-template='{{range .items}}{{$ns := .metadata.namespace}}{{$name := .metadata.name}}{{range $i, $f := .metadata.finalizers}}{{if eq $f "'"$finalizer"'"}}{{$ns}} {{$name}} {{$i}}{{"\n"}}{{end}}{{end}}{{end}}' 2>/dev/null || true
}

# The JSON patch tests that the finalizer is still at that index, so it never removes another one; a
# patch that fails (the operator removed it meanwhile, the group is gone) is tried again next round.
remove_finalizers() {
  local ns name index
  while read -r ns name index; do
    [[ -n "$name" ]] || continue
    "$kubectl" patch sharegroups.sharestate.dev -n "$ns" "$name" --type=json -p \
      "[{\"op\":\"test\",\"path\":\"/metadata/finalizers/$index\",\"value\":\"$finalizer\"},{\"op\":\"remove\",\"path\":\"/metadata/finalizers/$index\"}]" \
      >/dev/null 2>&1 && log "removed the finalizer of ShareGroup $ns/$name" || true
  done
}

deadline=$(( SECONDS + timeout ))
while "$kubectl" get crd sharegroups.sharestate.dev >/dev/null 2>&1; do
  with_finalizer | remove_finalizers
  if "$kubectl" wait --for=delete crd/sharegroups.sharestate.dev --timeout=2s >/dev/null 2>&1; then
    break
  fi
  if (( SECONDS > deadline )); then
    log "the ShareGroup CRD is still there after ${timeout}s; another finalizer may hold a ShareGroup:"
    "$kubectl" get sharegroups.sharestate.dev --all-namespaces \
      -o custom-columns=NAMESPACE:.metadata.namespace,NAME:.metadata.name,FINALIZERS:.metadata.finalizers >&2 || true
    exit 1
  fi
done
log "done"
