#!/usr/bin/env bash
# ggml.sh — builds bench/peers/ggml_decode.c (ggml's CPU flash attention
# beside ropeattn's decode step) against a ggml checkout built with cmake.
# Not part of `make` or CI: ggml is fetched and built beside the project.
#   GGML_DIR=/path/to/ggml bash bench/peers/ggml.sh
# GGML_DIR must hold include/ggml.h and build/src/libggml*.so, e.g.:
#   git clone https://github.com/ggml-org/ggml "$GGML_DIR"
#   cmake -S "$GGML_DIR" -B "$GGML_DIR/build" -DCMAKE_BUILD_TYPE=Release \
#         -DGGML_NATIVE=ON -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF
#   cmake --build "$GGML_DIR/build" -j
# (GGML_NATIVE: -march=native, as ggml builds by default; OpenMP when found,
# ggml's default.)  BUILD (default build) must hold libropeattn.a (make);
# writes $BUILD/peers/ggml_decode.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${GGML_DIR:?ggml.sh: set GGML_DIR to a ggml checkout built with cmake (see the top)}"
BUILD=${BUILD:-build}
LIBS=$GGML_DIR/build/src
[ -f "$GGML_DIR/include/ggml.h" ] || { echo "ggml.sh: no $GGML_DIR/include/ggml.h" >&2; exit 1; }
[ -f "$LIBS/libggml.so" ] || { echo "ggml.sh: no $LIBS/libggml.so (build ggml, see the top)" >&2; exit 1; }
[ -f "$BUILD/libropeattn.a" ] || { echo "ggml.sh: no $BUILD/libropeattn.a (make)" >&2; exit 1; }
mkdir -p "$BUILD/peers"
${CC:-cc} -std=c11 -D_POSIX_C_SOURCE=200809L -O2 -Wall -Wextra -Iinclude -I"$GGML_DIR/include" \
    -o "$BUILD/peers/ggml_decode" bench/peers/ggml_decode.c "$BUILD/libropeattn.a" \
    -L"$LIBS" -lggml -lggml-base -lggml-cpu -Wl,-rpath,"$(cd "$LIBS" && pwd)" \
    "$(pkg-config --libs openblas 2>/dev/null || echo -lopenblas)" -lm -pthread
echo "$BUILD/peers/ggml_decode"
