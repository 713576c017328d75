#!/usr/bin/env bash
# Runs every test: the Criterion suites (unit, kernels, cli) in a normal
# build and again under AddressSanitizer + UndefinedBehaviorSanitizer, then
# a bounded run of every libFuzzer target (scripts/fuzz.sh: 80 s of
# fuzzing, two targets at a time). Ends with "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh || exit 1
fuzz_seconds=${FUZZ_SECONDS:-80}

[ -f build/build.ninja ] || meson setup build >/dev/null || exit 1
ninja -C build || exit 1
meson test -C build --print-errorlogs --num-processes 2

[ -f build-asan/build.ninja ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false \
  -Dbuildtype=debug >/dev/null || exit 1
ninja -C build-asan || exit 1
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs --num-processes 2 --timeout-multiplier 4

fuzz=ok
scripts/fuzz.sh "$fuzz_seconds" || fuzz=fail

python3 scripts/test-summary.py build/meson-logs/testlog.json build-asan/meson-logs/testlog.json "fuzz=$fuzz"
