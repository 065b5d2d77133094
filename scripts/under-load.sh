#!/usr/bin/env bash
# Runs a command while every core is kept busy by another process, as a loaded CI machine or a
# laptop doing other work would be (docs/testing.md):
#   scripts/under-load.sh npm test
#   LOAD_NICE=0 scripts/under-load.sh npm test     # the loops compete at the tests' own priority
# One busy loop per core (pinned to it where taskset exists), at nice LOAD_NICE (default 19);
# they are stopped when the command ends, however it ends. Exits with the command's status.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARG...]" >&2; exit 2; }
nice_level=${LOAD_NICE:-19}
pids=()
stop() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap stop EXIT INT TERM
cores=$(nproc)
for ((core = 0; core < cores; core++)); do
  if command -v taskset >/dev/null; then
    taskset -c "$core" nice -n "$nice_level" bash -c 'while :; do :; done' &
  else
    nice -n "$nice_level" bash -c 'while :; do :; done' &
  fi
  pids+=($!)
done
echo "# under load: $cores busy loops at nice $nice_level (pids ${pids[*]})" >&2
status=0
"$@" || status=$?
exit $status
