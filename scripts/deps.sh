#!/usr/bin/env bash
# Installs the Debian 12 packages the build and the tests need (skipped
# when they are all present). The CUDA 13.0 toolkit is expected in
# /usr/local/cuda and is not installed here.
set -euo pipefail
packages=(gcc g++ meson ninja-build pkg-config re2c libcriterion-dev llvm-19-dev
          libzstd-dev zlib1g-dev clang libclang-rt-14-dev python3 cmake make)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
