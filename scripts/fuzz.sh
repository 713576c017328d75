#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) and runs each of them
# for a bounded time: SECONDS of fuzzing in all (default 80), shared out by
# weight (fuzz_codegen, which runs LLVM for every input, and the
# compile-and-run targets get more), two targets at a time on the two
# cores, so the run takes about SECONDS / 2 plus the build. Each target starts
# from its working corpus (scripts/fuzz-common.sh). Prints one line per
# target (executions, coverage) and exits non-zero on any crash, leak,
# timeout or sanitizer report, with the input saved under
# build-fuzz/artifacts. Long runs: scripts/fuzz-long.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-80}
source scripts/fuzz-common.sh
fuzz_setup

# Weights: the share of the time each target gets, by how slow its inputs
# are (microseconds for fuzz_meta, up to a second for fuzz_codegen).
declare -A weight=([fuzz_frontend]=2 [fuzz_interp]=2 [fuzz_options]=2 [fuzz_run_args]=1 [fuzz_meta]=1 [fuzz_codegen]=4)
total=0
for t in "${FUZZ_TARGETS[@]}"; do total=$((total + weight[$t])); done
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

run_target() {
  local t=$1 s=$2
  mapfile -t flags < <(fuzz_flags "$t")
  "$FUZZ_BUILD/tests/fuzz/$t" -max_total_time="$s" "${flags[@]}" "$FUZZ_BUILD/corpus/$t" >"$logs/$t.log" 2>&1
}

# Two lanes (the machine's two cores), each taking the next target.
status=0
lane() {
  local rc=0
  for t in "$@"; do
    local s=$(((seconds * weight[$t] + total - 1) / total))
    run_target "$t" "$s" || { echo "$t: FAILED" >>"$logs/failed"; rc=1; }
  done
  return $rc
}
lane_a=() lane_b=()
for i in "${!FUZZ_TARGETS[@]}"; do
  if [ $((i % 2)) -eq 0 ]; then lane_a+=("${FUZZ_TARGETS[$i]}"); else lane_b+=("${FUZZ_TARGETS[$i]}"); fi
done
lane "${lane_a[@]}" &
pid_a=$!
lane "${lane_b[@]}" || status=1
wait "$pid_a" || status=1

for t in "${FUZZ_TARGETS[@]}"; do
  runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$logs/$t.log" | grep -o '[0-9]*$' || echo 0)
  cov=$(grep -o 'cov: [0-9]*' "$logs/$t.log" | tail -n 1 || true)
  echo "$t: ${runs:-0} executions, ${cov:-cov: ?}"
done
[ -f "$logs/failed" ] && { cat "$logs/failed"; for f in "$logs"/*.log; do grep -A30 -m1 -E '^==[0-9]+==ERROR|runtime error|Test unit written' "$f" | head -n 40 || true; done; }
if [[ ! " ${FUZZ_TARGETS[*]} " =~ " fuzz_codegen " ]]; then echo "fuzz_codegen: not built (no LLVM 19 in $FUZZ_BUILD)"; fi
exit $status
