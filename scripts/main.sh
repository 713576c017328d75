#!/usr/bin/env bash
# The main job: build, compile the standard library's flash attention
# forward and run it on random inputs, printing its error against a float64
# reference. It runs in the interpreter (the GPU path arrives with the NVPTX
# back end). Extra arguments go to the program (--causal, --dim 128, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build >/dev/null
./build/examples/flash_attention/flash_attention "$@"
./build/examples/flash_attention/flash_attention --causal --dim 128 --seqlen 200 --heads 2
