#!/usr/bin/env bash
# Installs what ropeattn needs on Debian 12, if missing.
#   bash scripts/install-deps.sh demo   to build and run the demo: a C
#                                       compiler and make, OpenBLAS (CBLAS),
#                                       cJSON, pkg-config; Python's headers,
#                                       setuptools and NumPy (its Python part)
#   bash scripts/install-deps.sh        to build and test, also: CMake for the
#                                       install test, the aarch64 cross compiler, its C
#                                       library and qemu-user for the NEON
#                                       test, valgrind (make valgrind-cli),
#                                       clang and its runtimes (the libFuzzer
#                                       targets, the sanitized suite), the
#                                       Python package's install and tests
#                                       (python3-venv, -pip, -pytest, and
#                                       -torch for its PyTorch functions),
#                                       Open MPI (openmpi-bin, libopenmpi-dev:
#                                       libropeattn_mpi and its tests)
# PyTorch also regenerates the fixtures (make fixtures).
set -euo pipefail
packages=(build-essential pkg-config libopenblas-dev libcjson-dev
          python3 python3-dev python3-numpy python3-setuptools)
if [ "${1:-}" != demo ]; then
    packages+=(cmake gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
               valgrind clang libclang-rt-14-dev python3-venv python3-pip python3-pytest
               python3-torch openmpi-bin libopenmpi-dev)
fi
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
