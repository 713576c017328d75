#!/bin/sh
# examples/tp_mlp's reports on machines that cannot run it, over the fake
# driver (tests/unit/fake_cuda.c, found as libcuda.so.1 in FAKE_DIR): too
# few GPUs, no NCCL for several, no GPU at all (skipped, 77).
#   check_tp_mlp.sh TP_MLP FAKE_DIR
set -u
tp=$1 dir=$2
fails=0
expect() { # expect STATUS TEXT ENV... -- ARGS...
  status=$1 text=$2
  shift 2
  envs=""
  while [ "$1" != "--" ]; do envs="$envs $1"; shift; done
  shift
  out=$(env LD_LIBRARY_PATH="$dir" $envs "$tp" --tokens 100 --d-model 64 --d-ff 128 "$@" 2>&1)
  got=$?
  if [ "$got" -ne "$status" ] || ! printf '%s' "$out" | grep -qF "$text"; then
    echo "not ok: tp_mlp $* ($envs): exit $got, expected $status and '$text'; it printed:"
    echo "$out"
    fails=$((fails + 1))
  else
    echo "ok: tp_mlp $* ($envs): $text"
  fi
}
expect 1 "tp_mlp: --gpus 2 needs 2 GPUs; this machine has 1" FAKE_CUDA_DEVICES=1 -- --gpus 2
expect 1 "NCCL is needed for more than one GPU: no NCCL: /nonexistent/libnccl.so.2 could not be loaded" \
  FAKE_CUDA_DEVICES=2 -- --gpus 2 --nccl /nonexistent/libnccl.so.2
expect 77 "tp_mlp: no GPU" FAKE_CUDA_DEVICES=0 --
expect 2 "d_ff (128) does not split into 3 slices of a multiple of 8" FAKE_CUDA_DEVICES=3 -- --gpus 3
[ "$fails" -eq 0 ]
