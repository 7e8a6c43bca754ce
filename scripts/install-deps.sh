#!/usr/bin/env bash
# Installs what ropeattn needs to build and test on Debian 12, if missing:
# a C compiler and make, OpenBLAS (CBLAS), cJSON, pkg-config, NumPy for the
# CLI tests, the aarch64 cross compiler, its C library and qemu-user for the
# NEON test, and valgrind for `make valgrind-cli`.  PyTorch is needed only to
# regenerate fixtures (make fixtures).
set -euo pipefail
packages=(build-essential pkg-config libopenblas-dev libcjson-dev python3 python3-numpy
          gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
          valgrind)
packages+=(clang libclang-rt-14-dev) # the libFuzzer targets (make fuzz)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "installing: ${missing[*]}"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
