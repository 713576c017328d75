#!/bin/sh
# examples/meson with tile as a meson subproject (subprojects/tile a link
# to this source tree): dependency('tile') and find_program('tilec') come
# from tile's meson.override_dependency / override_find_program, and none
# of tile's tests, examples or benchmarks are configured.
#   check_subproject.sh SOURCE_DIR
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/examples"
cp -r "$src/examples/meson" "$src/examples/vector_add" "$tmp/examples/"
mkdir "$tmp/examples/meson/subprojects"
ln -s "$src" "$tmp/examples/meson/subprojects/tile"
meson setup "$tmp/build" "$tmp/examples/meson" -Dtile_from=subproject > "$tmp/setup.log" 2>&1 ||
  { cat "$tmp/setup.log"; exit 1; }
grep -q "Dependency tile found: YES .*(overridden)" "$tmp/setup.log" &&
  grep -q "Program tilec found: YES (overridden)" "$tmp/setup.log" ||
  { cat "$tmp/setup.log"; echo "check_subproject: dependency('tile') or tilec did not come from the subproject"; exit 1; }
# tile's own test programs and benchmarks are not targets
targets=$(ninja -C "$tmp/build" -t targets all)
echo "$targets" | grep -q "^saxpy_kernels.h:" || { echo "check_subproject: no saxpy_kernels.h target"; exit 1; }
for t in test_codegen tile-gpu frontend_bench tile_gpu_smoke; do
  if echo "$targets" | grep -q "$t"; then echo "check_subproject: tile's $t is a target"; exit 1; fi
done
ninja -C "$tmp/build" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; exit 1; }
set +e
"$tmp/build/saxpy" > "$tmp/run.log" 2>&1
rc=$?
set -e
[ $rc -eq 0 ] || [ $rc -eq 77 ] || { cat "$tmp/run.log"; echo "check_subproject: saxpy exited $rc"; exit 1; }
echo "check_subproject: ok"
