#!/bin/sh
# Installs the build into a temporary directory (meson install --destdir)
# and builds tests/install/embed.c against what was installed, with
# pkg-config alone (the .pc files' prefix pointed at the temporary copy);
# then runs it on an installed standard-library file; then the same for
# tests/install/jit.c with the JIT's pkg-config file.
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
for h in tile.h tilec.h tile_jit.h tile_attention.h tile_mlp.h; do
  [ -f "$tmp$prefix/include/tile/$h" ] || { echo "check_install: $h not installed"; exit 1; }
done
# ($cc and the pkg-config flags are split into words on purpose)
PKG_CONFIG_PATH="$tmp/pc" $cc -std=c17 -Wall -Wextra -Werror "$src/tests/install/embed.c" \
  $(PKG_CONFIG_PATH="$tmp/pc" pkg-config --cflags --libs tilec tile tile_attention tile_mlp) -o "$tmp/embed"
std="$tmp$prefix/share/tile/std"
[ -f "$std/softmax.tile" ] || { echo "check_install: the standard library is not under share/tile/std"; exit 1; }
"$tmp/embed" "$std/softmax.tile"
# The JIT alone: `pkg-config --libs tile-jit` is all it links with. Two
# processes share a cache: the first compiles, the second reads the disk.
PKG_CONFIG_PATH="$tmp/pc" $cc -std=c17 -Wall -Wextra -Werror "$src/tests/install/jit.c" \
  $(PKG_CONFIG_PATH="$tmp/pc" pkg-config --cflags --libs tile-jit) -o "$tmp/jit"
"$tmp/jit" "$std/softmax.tile" "$tmp/cache" compiled
"$tmp/jit" "$std/softmax.tile" "$tmp/cache" disk
echo "check_install: ok"
