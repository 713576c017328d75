#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan) and fuzzes the front end
# and the IR parser for a bounded time (default 60 s) from a seed corpus of
# every kernel's source and printed IR. Exits non-zero on any crash.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dtests=disabled -Dllvm=disabled >/dev/null
fi
ninja -C build-fuzz >/dev/null
[ -f build/build.ninja ] || meson setup build >/dev/null
ninja -C build compiler/tilec >/dev/null
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
for f in lang/std/*.tile tests/kernels/*.tile; do
  cp "$f" "$corpus/"
  ./build/compiler/tilec "$f" --emit=ir > "$corpus/$(basename "$f").ir"
done
./build-fuzz/tests/fuzz/fuzz_frontend -max_total_time="$seconds" -max_len=16384 -timeout=20 \
  -rss_limit_mb=4096 -print_final_stats=1 "$corpus" 2>&1 | tail -n 12
