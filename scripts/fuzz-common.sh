# Sourced by scripts/fuzz.sh and scripts/fuzz-long.sh: builds the libFuzzer
# targets (clang, ASan + UBSan, LLVM 19 where installed so that
# fuzz_codegen exists) in build-fuzz and lays out one working corpus per
# target in build-fuzz/corpus/TARGET: the committed seeds of
# tests/fuzz/corpus/TARGET, and for the targets that read .tile source, the
# std and test kernels (and, for fuzz_frontend, their printed IR). The
# working corpora are kept between runs, so a run starts where the last one
# stopped. Defines: FUZZ_BUILD, FUZZ_TARGETS (those built), fuzz_flags.
FUZZ_BUILD=build-fuzz
FUZZ_ALL_TARGETS=(fuzz_frontend fuzz_interp fuzz_options fuzz_run_args fuzz_meta fuzz_codegen)

fuzz_setup() {
  if [ ! -f "$FUZZ_BUILD/build.ninja" ]; then
    CC=clang CXX=clang++ meson setup "$FUZZ_BUILD" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
      -Dtests=disabled -Dllvm=auto >/dev/null
  fi
  local outputs=(compiler/driver/tilec) known
  # Into a variable first: under pipefail, grep -q closing the pipe early
  # would make ninja's SIGPIPE fail the test at random.
  known=$'\n'$(ninja -C "$FUZZ_BUILD" -t targets all 2>/dev/null)
  for t in "${FUZZ_ALL_TARGETS[@]}"; do
    # fuzz_codegen exists only in a build with LLVM.
    if [[ $known == *$'\n'"tests/fuzz/$t: "* ]]; then outputs+=("tests/fuzz/$t"); fi
  done
  ninja -C "$FUZZ_BUILD" "${outputs[@]}" >/dev/null
  FUZZ_TARGETS=()
  for t in "${FUZZ_ALL_TARGETS[@]}"; do
    [ -x "$FUZZ_BUILD/tests/fuzz/$t" ] && FUZZ_TARGETS+=("$t")
  done
  for t in "${FUZZ_TARGETS[@]}"; do
    local dir="$FUZZ_BUILD/corpus/$t"
    mkdir -p "$dir"
    [ -d "tests/fuzz/corpus/$t" ] && cp tests/fuzz/corpus/"$t"/* "$dir/"
    case "$t" in
    fuzz_frontend | fuzz_interp | fuzz_codegen)
      cp lang/std/*.tile tests/kernels/*.tile tests/fuzz/corpus/fuzz_interp/*.tile "$dir/"
      ;;
    esac
    if [ "$t" = fuzz_frontend ]; then
      for f in lang/std/*.tile tests/kernels/*.tile; do
        ASAN_OPTIONS=detect_leaks=0 "$FUZZ_BUILD/compiler/driver/tilec" "$f" --emit=ir >"$dir/$(basename "$f").ir" || true
      done
    fi
  done
  mkdir -p "$FUZZ_BUILD/artifacts"
}

# Options of every run: a 20 s timeout per input, the machine's memory
# (2 cores, 24 GiB) shared by two runs, crash files in build-fuzz/artifacts.
fuzz_flags() {
  local t=$1
  # Absolute paths: fuzz-long.sh runs the jobs in their log directory.
  local flags=(-timeout=20 -rss_limit_mb=4096 -max_len=16384 -print_final_stats=1
               "-artifact_prefix=$PWD/$FUZZ_BUILD/artifacts/$t-")
  case "$t" in
  fuzz_frontend | fuzz_interp | fuzz_codegen) flags+=("-dict=$PWD/tests/fuzz/tile.dict") ;;
  *) if [ -f "tests/fuzz/$t.dict" ]; then flags+=("-dict=$PWD/tests/fuzz/$t.dict"); fi ;;
  esac
  printf '%s\n' "${flags[@]}"
}
