#!/usr/bin/env bash
# Checks the commit messages since the project adopted its rule (docs/overview.md states it): a
# subject of at most 72 characters, and the detail in a body after a blank line. Commits before SINCE
# are history and not checked; in a clone without SINCE (a shallow one) only HEAD is.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

SINCE=${SINCE:-75414e8} # the last commit whose subject ran past 72 characters
MAX=72

if git merge-base --is-ancestor "$SINCE" HEAD 2>/dev/null; then
  range="$SINCE..HEAD"
else
  range="-1 HEAD"
fi
failed=0
for commit in $(git rev-list $range); do
  subject=$(git log -1 --format=%s "$commit")
  second=$(git log -1 --format=%B "$commit" | sed -n 2p)
  if ((${#subject} > MAX)); then
    echo "commit ${commit:0:7}: a subject of ${#subject} characters, more than $MAX: $subject"
    failed=1
  fi
  if [[ -n $second ]]; then
    echo "commit ${commit:0:7}: no blank line between the subject and the body"
    failed=1
  fi
done
exit $failed
