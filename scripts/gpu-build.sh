#!/usr/bin/env bash
# Builds what runs on the GPU machine (which has no LLVM, re2c or
# Criterion): tile-gpu (GPU tests and benchmarks, with LLVM linked
# statically), tilec (gzipped, for `tilec tune`) and the examples, stripped, into gpu-dist/ (git-ignored),
# which the device tool carries (at most 64 MiB: examples/jit, which links
# LLVM too, is not copied; tile-gpu's "jit" case runs the JIT there). Then: scripts/gpu-run.sh on the device.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
if [ ! -f build-gpu/build.ninja ]; then
  meson setup build-gpu -Dllvm_static=true -Dtests=disabled -Dbuildtype=release >/dev/null
fi
ninja -C build-gpu compiler/driver/tilec tests/gpu/tile-gpu examples/flash_attention/flash_attention examples/vector_add/saxpy \
  examples/moe_layer/moe_layer examples/tp_mlp/tp_mlp >/dev/null
rm -rf gpu-dist
mkdir -p gpu-dist
cp build-gpu/compiler/driver/tilec build-gpu/tests/gpu/tile-gpu build-gpu/examples/flash_attention/flash_attention build-gpu/examples/vector_add/saxpy \
  build-gpu/examples/moe_layer/moe_layer build-gpu/examples/tp_mlp/tp_mlp gpu-dist/
strip gpu-dist/*
# tilec links LLVM too: compressed, so that both fit what the device tool
# carries (bench/tune.sh unpacks it there)
gzip -9 gpu-dist/tilec
ls -la gpu-dist
