#!/usr/bin/env bash
# `tilec tune` over the standard library's GEMM (gemm_ws, three shapes)
# and forward attention (flash_attention_ws, d128, 16k tokens, full and
# causal), each tuned twice by separate processes sharing one cache: the
# first compiles and times every @config candidate and the kernel with its
# defaults (--defaults), the second finds the stored choice and times
# nothing. On the GPU machine, after scripts/gpu-build.sh:
#
#   bash bench/tune.sh [TILEC]       (default ./gpu-dist/tilec, or tilec.gz unpacked)
#
# Logs go to $OUT (or the current directory): tune-logs.txt, and the
# summary table, which is printed last, in tune-summary.txt.
set -uo pipefail
out=${OUT:-.}
cache=$(mktemp -d /tmp/tile-tune-XXXXXX)
trap 'rm -rf "$cache"' EXIT
tilec=${1:-./gpu-dist/tilec}
if [ ! -x "$tilec" ] && [ -f "$tilec.gz" ]; then # as scripts/gpu-build.sh leaves it
  gzip -dc "$tilec.gz" > "$cache/tilec" && chmod +x "$cache/tilec" && tilec=$cache/tilec
fi
rc=0
opts=(--cache "$cache" --warmup 10 --reps 30)

gemm() {
  local m=$1 n=$2 k=$3
  shift 3
  timeout 300 "$tilec" tune lang/std/gemm_ws.tile -k gemm_ws "${opts[@]}" \
    --grid 'CLUSTER * min(cdiv(m, CLUSTER * BLOCK_M) * cdiv(n, BLOCK_N), num_sms / CLUSTER)' \
    --arg c=zeros:${m}x${n} --arg a=rand:${m}x${k} --arg b=rand:${k}x${n} --arg m=$m --arg n=$n --arg k=$k \
    --key-args m,n,k "$@"
}

attention() {
  local seqlen=$1 heads=$2 causal=$3
  shift 3
  local rows=$((seqlen * heads))
  timeout 300 "$tilec" tune lang/std/flash_attention_ws.tile -k flash_attention_ws "${opts[@]}" -D CAUSAL=$causal \
    --grid 'cdiv(seqlen, BLOCK_M), heads' \
    --arg out=zeros:$((rows * 128)) --arg lse=zeros:$rows --arg q=rand:${rows}x128 --arg k=rand:${rows}x128 \
    --arg v=rand:${rows}x128 --arg cu_q=zeros:1 --arg cu_k=zeros:1 --arg seqlen=$seqlen --arg heads=$heads \
    --arg heads_kv=$heads --arg sm_scale=0.08838834764831845 --key-args seqlen,heads,CAUSAL "$@"
}

# NAME COMMAND...: the first run (with --defaults) and the second, logged
twice() {
  local name=$1
  shift
  "$@" --defaults > "$out/tune-$name-1.log" 2>&1 || rc=1
  "$@" > "$out/tune-$name-2.log" 2>&1 || rc=1
}

twice gemm-8192 gemm 8192 8192 8192
twice gemm-4096 gemm 4096 4096 4096
twice gemm-16384x2048x8192 gemm 16384 2048 8192
twice attention-16k attention 16384 16 false
twice attention-16k-causal attention 16384 16 true

# the summary: per tuning, the chosen candidate's median in the tuning,
# then the defaults and the chosen timed again side by side (--defaults),
# and whether the second process read the stored choice
{
  printf '%-24s %10s %10s %10s %8s  %s\n' tuning tuned_ms default_ms chosen_ms ratio "second process"
  for f in "$out"/tune-*-1.log; do
    name=$(basename "$f" -1.log)
    name=${name#tune-}
    tuned=$(awk '$1 == "*" {print $2}' "$f")
    line=$(grep "const parameters' defaults, timed beside" "$f")
    defaults=$(awk '{print $1}' <<< "$line")
    again=$(sed -n 's/.*chosen (\([0-9.]*\) ms then).*/\1/p' <<< "$line")
    ratio=$(sed -n 's/.*the chosen is \([0-9.]*\)x as fast.*/\1/p' <<< "$line")
    second=$(grep -q "nothing was timed" "$out/tune-$name-2.log" && echo "stored choice, not timed" ||
      echo "timed again (or failed: see its log)")
    printf '%-24s %10s %10s %10s %8s  %s\n' "$name" "${tuned:--}" "${defaults:--}" "${again:--}" "${ratio:--}" "$second"
  done
} | tee "$out/tune-summary.txt"
# one file of all the logs (the device tool brings back a few files only)
for f in "$out"/tune-*-[12].log; do echo "== $(basename "$f")"; cat "$f"; done > "$out/tune-logs.txt"
rm -f "$out"/tune-*-[12].log
exit $rc
