#!/bin/sh
# Installs the build into a temporary directory (meson install --destdir)
# and builds tests/install/embed.c against what was installed, with
# pkg-config alone (the .pc files' prefix pointed at the temporary copy);
# then runs it on an installed standard-library file; then the same for
# tests/install/jit.c with the JIT's pkg-config file; then examples/ built
# by CMake, meson and make against the installed copy.
#   check_install.sh BUILD_DIR SOURCE_DIR CC
set -eu
build=$1 src=$2 cc=$3 # cc: the compiler command, with flags
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build" --no-rebuild --destdir "$tmp" > "$tmp/install.log"
pcdir=$(dirname "$(find "$tmp" -name tile.pc | head -n 1)")
prefix=$(sed -n 's/^prefix=//p' "$pcdir/tile.pc")
mkdir "$tmp/pc"
for f in "$pcdir"/*.pc; do
  sed "s|^prefix=.*|prefix=$tmp$prefix|" "$f" > "$tmp/pc/$(basename "$f")"
done
for lib in tile tilec tile-jit tile_attention tile_mlp; do
  [ -f "$tmp/pc/$lib.pc" ] || { echo "check_install: no $lib.pc installed"; exit 1; }
done
# the standard library's directory for JIT users' include_dirs
for lib in tilec tile-jit; do
  d=$(PKG_CONFIG_PATH="$tmp/pc" pkg-config --variable=importdir $lib)
  [ -f "$d/std/softmax.tile" ] || { echo "check_install: $lib.pc's importdir '$d' has no std/softmax.tile"; exit 1; }
done
for f in libtile.a libtile.so libtile.so.0; do
  [ -n "$(find "$tmp$prefix" -name "$f" | head -n 1)" ] ||
    { echo "check_install: $f not installed"; exit 1; }
done
# Programs linked through pkg-config find libtile.so here (the prefix is
# not one the loader searches).
LD_LIBRARY_PATH="$(dirname "$(find "$tmp$prefix" -name libtile.so | head -n 1)")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
for h in tile.h tile_nccl.h tilec.h tile_jit.h tile_attention.h tile_mlp.h tile_tp.h; do
  [ -f "$tmp$prefix/include/tile/$h" ] || { echo "check_install: $h not installed"; exit 1; }
done
# ($cc and the pkg-config flags are split into words on purpose)
PKG_CONFIG_PATH="$tmp/pc" $cc -std=c17 -Wall -Wextra -Werror "$src/tests/install/embed.c" \
  $(PKG_CONFIG_PATH="$tmp/pc" pkg-config --cflags --libs tilec tile tile_attention tile_mlp) -o "$tmp/embed"
std="$tmp$prefix/share/tile/std"
[ -f "$tmp$prefix/share/man/man1/tilec.1" ] || { echo "check_install: the manual page is not under share/man/man1"; exit 1; }
[ -f "$std/softmax.tile" ] || { echo "check_install: the standard library is not under share/tile/std"; exit 1; }
# The installed tilec finds the installed standard library from its own
# place (here under the destdir, not at the prefix it was built for): the
# dependency file names the copy it read.
printf 'import "std/mlp.tile";\nkernel k(out: *f32) { store(out, mlp.gated(1.0, 2.0, 0)); }\n' > "$tmp/uses_std.tile"
"$tmp$prefix/bin/tilec" "$tmp/uses_std.tile" --emit=ir -o "$tmp/uses_std.tir" -MD
grep -q " $tmp$prefix/bin/\.\./share/tile/std/mlp\.tile" "$tmp/uses_std.tir.d" ||
  { cat "$tmp/uses_std.tir.d"; echo "check_install: the installed tilec did not read the installed std"; exit 1; }
"$tmp/embed" "$std/softmax.tile"
# -ltile linked the shared library
readelf -d "$tmp/embed" | grep -q 'NEEDED.*\[libtile\.so\.0\]' || { echo "check_install: embed does not use libtile.so"; exit 1; }
# The JIT alone: `pkg-config --libs tile-jit` is all it links with. Two
# processes share a cache: the first compiles, the second reads the disk.
PKG_CONFIG_PATH="$tmp/pc" $cc -std=c17 -Wall -Wextra -Werror "$src/tests/install/jit.c" \
  $(PKG_CONFIG_PATH="$tmp/pc" pkg-config --cflags --libs tile-jit) -o "$tmp/jit"
"$tmp/jit" "$std/softmax.tile" "$tmp/cache" compiled
"$tmp/jit" "$std/softmax.tile" "$tmp/cache" disk
# examples/vector_add built by CMake (find_package(tile), tile_add_kernels: the archives)
# and by make (pkg-config, tilec) against the installed copy; each program
# runs (77: no GPU here).
run_example() {
  set +e
  "$1" > "$tmp/example.log" 2>&1
  rc=$?
  set -e
  [ $rc -eq 0 ] || [ $rc -eq 77 ] || { cat "$tmp/example.log"; echo "check_install: $1 exited $rc"; exit 1; }
}
if command -v cmake >/dev/null 2>&1; then
  CC="${cc%% *}" cmake -S "$src/examples/cmake" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$tmp$prefix" \
    -DCMAKE_C_FLAGS="$(echo "$cc" | cut -s -d' ' -f2-)" > "$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; exit 1; }
  cmake --build "$tmp/cmake" > "$tmp/cmake-build.log" 2>&1 || { cat "$tmp/cmake-build.log"; exit 1; }
  run_example "$tmp/cmake/saxpy"
  echo "check_install: examples/cmake built"
  # the package under either spelling, and its version check: 0.1 is
  # found, 1.0 (another major version) and 0.2 (another 0.x) are not
  mkdir -p "$tmp/cmake-version"
  for want in "Tile 0.1:found" "tile 1.0:refused" "tile 0.2:refused"; do
    printf 'cmake_minimum_required(VERSION 3.16)\nproject(v C)\nfind_package(%s REQUIRED)\n' "${want%%:*}" \
      > "$tmp/cmake-version/CMakeLists.txt"
    rm -rf "$tmp/cmake-version/b"
    set +e
    CC="${cc%% *}" cmake -S "$tmp/cmake-version" -B "$tmp/cmake-version/b" -DCMAKE_PREFIX_PATH="$tmp$prefix" \
      > "$tmp/cmake-version.log" 2>&1
    rc=$?
    set -e
    case "${want#*:}:$rc" in
      found:0 | refused:[1-9]*) ;;
      *) cat "$tmp/cmake-version.log"; echo "check_install: find_package(${want%%:*}) exited $rc"; exit 1 ;;
    esac
  done
  echo "check_install: find_package(tile VERSION) checks the version"
else
  echo "check_install: no cmake here; examples/cmake not built"
fi
# examples/meson against the installed copy: dependency('tile') through
# pkg-config, find_program('tilec') on PATH.
CC="${cc%% *}" CFLAGS="$(echo "$cc" | cut -s -d' ' -f2-)" LDFLAGS="$(echo "$cc" | cut -s -d' ' -f2-)" \
  PKG_CONFIG_PATH="$tmp/pc" PATH="$tmp$prefix/bin:$PATH" \
  meson setup "$tmp/meson" "$src/examples/meson" > "$tmp/meson.log" 2>&1 || { cat "$tmp/meson.log"; exit 1; }
grep -q "Run-time dependency tile found: YES" "$tmp/meson.log" || { cat "$tmp/meson.log"; exit 1; }
grep -q "Program tilec found: YES ($tmp$prefix/bin/tilec)" "$tmp/meson.log" || { cat "$tmp/meson.log"; exit 1; }
ninja -C "$tmp/meson" > "$tmp/meson-build.log" 2>&1 || { cat "$tmp/meson-build.log"; exit 1; }
run_example "$tmp/meson/saxpy"
echo "check_install: examples/meson built"
mkdir "$tmp/make"
PKG_CONFIG_PATH="$tmp/pc" make -s -C "$tmp/make" -f "$src/examples/make/Makefile" SRC="$src/examples/vector_add" \
  TILEC="$tmp$prefix/bin/tilec" CC="${cc%% *}" CFLAGS="$(echo "$cc" | cut -s -d' ' -f2-)" \
  LDFLAGS="$(echo "$cc" | cut -s -d' ' -f2-)" > "$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; exit 1; }
run_example "$tmp/make/saxpy"
echo "check_install: examples/make built"
echo "check_install: ok"
