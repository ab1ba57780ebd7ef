#!/usr/bin/env bash
# Runs a command (the test suite: scripts/test.sh runs ctest through it) and fails, naming them,
# when it left new entries in the temporary folder ($TMPDIR, else /tmp, and /tmp itself).
#   scripts/tmp_leftovers.sh COMMAND [ARGS...]
# A test writes under a temporary directory that it removes: what it leaves behind fills CI's
# small disk run after run, and a fixed name is shared by two runs at once. The entries are
# compared by name, before and after, so this is meant for a machine where nothing else writes
# there meanwhile (CI); an entry that comes and goes during the run is not reported.
# Exit status: the command's when it failed, else 1 when something was left, else 0.
set -uo pipefail
if [ $# -eq 0 ]; then
  echo "tmp_leftovers: expected a command to run" >&2
  exit 2
fi
folders=(/tmp)
if [ -n "${TMPDIR:-}" ] && [ "$(realpath -m "$TMPDIR")" != /tmp ]; then folders+=("$TMPDIR"); fi
declare -A before
for folder in "${folders[@]}"; do before[$folder]=$(ls -A -b "$folder" 2>/dev/null); done

"$@"
status=$?

left=0
for folder in "${folders[@]}"; do
  new=$(comm -13 <(printf '%s\n' "${before[$folder]}" | sort) <(ls -A -b "$folder" 2>/dev/null | sort))
  if [ -n "$new" ]; then
    count=$(printf '%s\n' "$new" | wc -l)
    echo "tmp_leftovers: the run left $count new entries in $folder (each test must remove what it writes there):" >&2
    printf '%s\n' "$new" | head -n 50 | sed 's/^/  /' >&2
    if [ "$count" -gt 50 ]; then echo "  ... and $((count - 50)) more" >&2; fi
    left=1
  fi
done
if [ $status -ne 0 ]; then exit $status; fi
exit $left
