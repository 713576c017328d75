#!/usr/bin/env bash
# Line coverage of the compiler library (compiler/) and libtile (runtime/)
# by the fuzz corpora: builds the fuzz targets with clang's source-based
# coverage (-fprofile-instr-generate -fcoverage-mapping, no sanitizers) in
# build-cov, runs every target once over its working corpus
# (build-fuzz/corpus/TARGET, as scripts/fuzz.sh and fuzz-long.sh leave it)
# and prints llvm-cov's report per file and the totals per directory.
# The llvm-profdata/llvm-cov used are those of clang's own version (the
# raw profile format changes between LLVM versions). Output also in
# build-cov/coverage.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/fuzz-common.sh
version=$(clang -dumpversion | cut -d. -f1)
profdata=$(command -v "llvm-profdata-$version" || command -v llvm-profdata)
llvmcov=$(command -v "llvm-cov-$version" || command -v llvm-cov)
flags='-fprofile-instr-generate -fcoverage-mapping'
if [ ! -f build-cov/build.ninja ]; then
  CC=clang CXX=clang++ meson setup build-cov -Dfuzz=true -Dtests=disabled -Dllvm=auto -Db_lundef=false \
    -Dc_args="$flags" -Dc_link_args="$flags" -Dbuildtype=debug >/dev/null
fi
outputs=()
# Into a variable first: under pipefail, grep -q closing the pipe early
# would make ninja's SIGPIPE fail the test at random.
known=$'\n'$(ninja -C build-cov -t targets all 2>/dev/null)
for t in "${FUZZ_ALL_TARGETS[@]}"; do
  if [[ $known == *$'\n'"tests/fuzz/$t: "* ]]; then outputs+=("tests/fuzz/$t"); fi
done
ninja -C build-cov "${outputs[@]}" >/dev/null
rm -rf build-cov/profiles
mkdir -p build-cov/profiles
objects=()
for o in "${outputs[@]}"; do
  t=$(basename "$o")
  [ -d "$FUZZ_BUILD/corpus/$t" ] || { echo "$t: no corpus in $FUZZ_BUILD/corpus/$t (run scripts/fuzz.sh first)" >&2; continue; }
  # fuzz_codegen also links every kernel (ptxas, nvJitLink) here
  TILE_FUZZ_LINKER=$([ "$t" = fuzz_codegen ] && echo 1 || echo 0) \
  LLVM_PROFILE_FILE="$PWD/build-cov/profiles/$t-%p.profraw" "build-cov/$o" -runs=0 -timeout=60 -rss_limit_mb=8192 \
    "$FUZZ_BUILD/corpus/$t" >"build-cov/profiles/$t.log" 2>&1 || echo "$t: run over the corpus failed (see build-cov/profiles/$t.log)" >&2
  objects+=(-object "build-cov/$o")
done
"$profdata" merge -sparse build-cov/profiles/*.profraw -o build-cov/fuzz.profdata
# The first object is given without -object.
"$llvmcov" report "${objects[@]:1}" -instr-profile=build-cov/fuzz.profdata \
  -ignore-filename-regex='(/tests/fuzz/|^/usr/)' >build-cov/report.txt
# Totals per directory from the per-file lines (lines: columns 8 and 9 of llvm-cov's table).
python3 - build-cov/report.txt <<'PY' | tee build-cov/coverage.txt
# Directories are compiler/<stage> and runtime. The library, libtilec, is
# compiler/ without the tilec executable's driver/main.c and driver/run.c
# (reported apart) and without the lexer re2c generates (a table-driven
# automaton in build-cov/compiler/lexer.c whose states are mostly the
# error paths of each character class; reported apart too).
import collections, re, sys
dirs = collections.defaultdict(lambda: [0, 0])
apart = {'compiler/driver/main.c': 'tilec (driver/main.c, run.c)', 'compiler/driver/run.c': 'tilec (driver/main.c, run.c)',
         'compiler/lexer.c': 'generated lexer (lexer.c)'}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 13 or not f[0].endswith(('.c', '.re', '.h')):
        continue
    # "/work/main/build-cov/../compiler/ir/ir.c", "../compiler/ir/ir.c" or
    # "build-cov/compiler/lexer.c" (generated): relative to the tree.
    path = re.sub(r'^.*build-cov/(\.\./)?', '', f[0])
    path = re.sub(r'^(\.\./)+', '', path)
    lines, missed = int(f[7]), int(f[8])
    if path in apart: d = apart[path]
    elif path.startswith('compiler/'): d = '/'.join(path.split('/')[:2])
    else: d = path.split('/')[0]
    dirs[d][0] += lines
    dirs[d][1] += missed
def pct(l, m): return 100.0 * (l - m) / l if l else 100.0
lib = [0, 0]
for d in sorted(dirs):
    l, m = dirs[d]
    if l == 0: continue
    print(f"{d:32s} {l - m:6d}/{l:6d} lines  {pct(l, m):5.1f}%")
    if d.startswith('compiler/'):
        lib[0] += l
        lib[1] += m
print(f"{'libtilec (compiler/ as above)':32s} {lib[0] - lib[1]:6d}/{lib[0]:6d} lines  {pct(*lib):5.1f}%")
PY
