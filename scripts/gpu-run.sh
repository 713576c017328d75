#!/usr/bin/env bash
# Runs on the GPU machine, from the repository root, after
# scripts/gpu-build.sh: the GPU test suite, the main job and the
# benchmarks (with the attention anchors from PyTorch where it is
# installed). Logs go to $OUT (or gpu-logs/); the benchmark tables are last.
#
#   scripts/gpu-run.sh             suite, main job, saxpy, the MoE layer and
#                                  tensor-parallel MLP examples, benchmarks
#   scripts/gpu-run.sh --sanitize  suite, then the suite again under each
#                                  compute-sanitizer tool (memcheck,
#                                  racecheck, synccheck, initcheck, run at
#                                  once), then the rest
set -uo pipefail
out=${OUT:-gpu-logs}
mkdir -p "$out"
sanitize=false
[ "${1:-}" = "--sanitize" ] && sanitize=true
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
# NCCL comes from the Python packages (PyTorch's) unless
# TILE_NCCL_LIBRARY names one: the GPU suite's one-rank NCCL layer and
# examples/tp_mlp use it.
if [ -z "${TILE_NCCL_LIBRARY:-}" ]; then
  sites=$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
  TILE_NCCL_LIBRARY=$(find $sites -name 'libnccl.so.2' 2>/dev/null | head -n 1)
  export TILE_NCCL_LIBRARY
fi
echo "NCCL: ${TILE_NCCL_LIBRARY:-none found}" > "$out/nccl.txt"
rc=0
timeout "${TEST_TIMEOUT:-900}" ./gpu-dist/tile-gpu --root . test 2>&1 | tee "$out/gpu-tests.log" || rc=1
if $sanitize; then
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  # The debug-mode trap tests trap on purpose, and NCCL is not ours to
  # check: neither runs under the sanitizer.
  for tool in memcheck racecheck synccheck initcheck; do
    TILE_NCCL_LIBRARY=/nonexistent/libnccl.so.2 TILE_GPU_SKIP_TRAPS=1 timeout "${SANITIZE_TIMEOUT:-540}" "$cs" --tool "$tool" --error-exitcode 3 --print-limit 100000 \
      ./gpu-dist/tile-gpu --root . test > "$out/sanitize-$tool.log" 2>&1 &
  done
  wait
  # (--print-limit: every error is printed, so that each one can be
  # classified; the default prints 100.)
  # libtile asks cuFuncGetParamInfo for the parameter after the last one
  # the metadata lists, to catch code with more parameters than its
  # metadata; the driver answers that probe with INVALID_VALUE, which
  # memcheck counts as an API error. Those are counted apart; any other
  # error fails the run.
  for tool in memcheck racecheck synccheck initcheck; do
    log="$out/sanitize-$tool.log"
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1)
    suite=$(grep -E "passed, .* failed" "$log" | tail -1)
    total=$(sed -nE 's/.*(ERROR SUMMARY|RACECHECK SUMMARY): ([0-9]+) .*/\2/p' "$log" | tail -1)
    probes=$(grep -c "INVALID_VALUE.*API call to cuFuncGetParamInfo" "$log")
    other=$(( ${total:-1} - probes ))
    echo "compute-sanitizer $tool: ${summary:-no summary}, of which $probes parameter-count probes:" \
      "$other other (${suite:-suite did not finish})"
    [ -n "$total" ] && [ "$other" -eq 0 ] && grep -q " 0 failed" <<< "$suite" || rc=1
  done > "$out/sanitize.txt"
fi
fa="./gpu-dist/flash_attention --source lang/std/flash_attention.tile"
{ $fa && $fa --causal --dim 128 --seqlen 300 --heads 3; } 2>&1 | tee "$out/main-job.log" || rc=1
./gpu-dist/saxpy 2>&1 | tee "$out/saxpy.log" || rc=1
timeout 120 ./gpu-dist/moe_layer 2>&1 | tee "$out/moe-layer.log" || rc=1
# The tensor-parallel MLP (examples/tp_mlp) over every GPU here, at
# Llama-3-70B's sizes, timed; on one GPU through a communicator of one
# rank (or without NCCL where none is found).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
cp "$out/nccl.txt" "$out/tp-mlp.log"
if [ "$gpus" -ge 1 ]; then
  timeout 300 ./gpu-dist/tp_mlp --gpus "$gpus" --bench 2>&1 | tee -a "$out/tp-mlp.log" || rc=1
  if [ "$gpus" -gt 1 ]; then # one process per GPU, and odd sizes
    timeout 300 ./gpu-dist/tp_mlp --gpus "$gpus" --procs --tokens 1000 --d-model 264 --d-ff $((520 * gpus)) 2>&1 |
      tee -a "$out/tp-mlp.log" || rc=1
  fi
fi
$sanitize || timeout "${BENCH_TIMEOUT:-900}" ./gpu-dist/tile-gpu --root . bench 2>&1 | tee "$out/bench.log" > /dev/null || rc=1
# The attention anchors (cuDNN, FlashAttention-2) come from PyTorch, in the
# same run, and the script prints the tile kernels' ratios to them.
if ! $sanitize && python3 -c "import torch" 2>/dev/null; then
  timeout "${ANCHOR_TIMEOUT:-300}" python3 bench/attention_anchor.py "$out/bench.log" > "$out/attention.md" 2>&1 || rc=1
  timeout "${ANCHOR_TIMEOUT:-300}" python3 bench/mlp_anchor.py "$out/bench.log" > "$out/mlp.md" 2>&1 || rc=1
fi
echo
grep -E "passed|FAIL" "$out/gpu-tests.log" | tail -5
$sanitize && cat "$out/sanitize.txt"
$sanitize || sed -n '/^| benchmark/,$p' "$out/bench.log"
[ -f "$out/attention.md" ] && cat "$out/attention.md"
[ -f "$out/mlp.md" ] && cat "$out/mlp.md"
grep -E '^(tp_mlp|\|)' "$out/tp-mlp.log"
exit $rc
