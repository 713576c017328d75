#!/usr/bin/env bash
# Long fuzzing runs: scripts/fuzz-long.sh SECONDS [TARGET...]
#
# Runs each target (default: every one built) for SECONDS with JOBS
# parallel libFuzzer jobs (-jobs/-workers, default: the number of cores)
# sharing the target's working corpus in build-fuzz/corpus/TARGET, then
# merges that corpus down to the inputs that add coverage (-merge=1).
# FORK=1 uses -fork instead, with crashes, timeouts and out-of-memory
# inputs saved and fuzzing going on past them (to collect every distinct
# crash of a target with a known bug). Logs: build-fuzz/logs/TARGET/;
# crash inputs: build-fuzz/artifacts/. Prints the executions per target
# and exits non-zero if any job found a problem.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz-long.sh SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
source scripts/fuzz-common.sh
fuzz_setup
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=("${FUZZ_TARGETS[@]}")
jobs=${JOBS:-$(nproc)}
status=0
for t in "${targets[@]}"; do
  bin="$FUZZ_BUILD/tests/fuzz/$t"
  [ -x "$bin" ] || { echo "$t: not built" >&2; status=1; continue; }
  logdir="$FUZZ_BUILD/logs/$t"
  rm -rf "$logdir"
  mkdir -p "$logdir"
  mapfile -t flags < <(fuzz_flags "$t")
  corpus="$FUZZ_BUILD/corpus/$t"
  rc=0
  if [ "${FORK:-0}" = 1 ]; then
    (cd "$logdir" && "$OLDPWD/$bin" -fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
      -max_total_time="$seconds" "${flags[@]}" "$OLDPWD/$corpus" >fork.log 2>&1) || rc=$?
  else
    # -jobs with -max_total_time: every job runs the whole time; libFuzzer
    # writes fuzz-N.log into the working directory.
    (cd "$logdir" && "$OLDPWD/$bin" -jobs="$jobs" -workers="$jobs" -max_total_time="$seconds" "${flags[@]}" \
      "$OLDPWD/$corpus" >jobs.log 2>&1) || rc=$?
  fi
  # Keep only the inputs that add coverage.
  merged="$corpus.merged"
  rm -rf "$merged"
  mkdir -p "$merged"
  "$bin" -merge=1 "${flags[@]}" "$merged" "$corpus" >"$logdir/merge.log" 2>&1 && rm -rf "$corpus" && mv "$merged" "$corpus"
  runs=$(cat "$logdir"/*.log | grep -o 'stat::number_of_executed_units: [0-9]*' | awk '{n += $2} END {print n + 0}' || true)
  if [ "${FORK:-0}" = 1 ]; then
    runs=$(grep -o '#[0-9]*: cov' "$logdir/fork.log" | tail -n 1 | tr -dc 0-9 || true)
  fi
  found=$(cat "$logdir"/*.log | grep -c -E '^==[0-9]+==ERROR|runtime error:|Test unit written' || true)
  echo "$t: ${runs:-0} executions in ${seconds} s x ${jobs} jobs, $(ls "$corpus" | wc -l) inputs in the merged corpus, $found problem reports"
  if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then status=1; fi
done
exit $status
