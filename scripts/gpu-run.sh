#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after
# scripts/gpu-build.sh: the GPU test suite, the main job and the
# benchmarks. Logs go to $OUT (or gpu-logs/); the benchmark table is last.
set -uo pipefail
out=${OUT:-gpu-logs}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
rc=0
./gpu-dist/tile-gpu --root . test 2>&1 | tee "$out/gpu-tests.log" || rc=1
fa="./gpu-dist/flash_attention --source lang/std/flash_attention.tile"
{ $fa && $fa --causal --dim 128 --seqlen 300 --heads 3; } 2>&1 | tee "$out/main-job.log" || rc=1
./gpu-dist/saxpy 2>&1 | tee "$out/saxpy.log" || rc=1
./gpu-dist/tile-gpu --root . bench 2>&1 | tee "$out/bench.log" > /dev/null || rc=1
echo
grep -E "passed|FAIL" "$out/gpu-tests.log" | tail -5
sed -n '/^| benchmark/,$p' "$out/bench.log"
exit $rc
