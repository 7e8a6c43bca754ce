#!/usr/bin/env bash
# The test suite: builds and runs every test; the allocation-failure test,
# ThreadSanitizer and valgrind runs (Makefile); libFuzzer on every target;
# then the suite again under AddressSanitizer + UndefinedBehaviorSanitizer,
# built by clang (as the fuzz targets are) where the other steps build with
# cc (GCC): so both compilers build the library and its SIMD kernels and
# pass the whole suite, at no extra build.
# Each run ends with a summary ("N passed, N failed"); the script fails if
# any test failed.  Each step's wall time is printed after it ("== step:
# N s"), and all of them at the end, so CI logs show where the time goes.
set -euo pipefail
cd "$(dirname "$0")/.."
times=""
step() { # name, command...: runs it and records its wall time
    local name=$1 start=$SECONDS
    shift
    "$@"
    echo "== $name: $((SECONDS - start)) s"
    times="$times  $name $((SECONDS - start)) s;"
}
step install-deps bash scripts/install-deps.sh
step build make -s -j"$(nproc)"
step test make test
step alloc-test make -j"$(nproc)" alloc-test # each allocation of each public path failing, under ASan+LSan
step tsan make -j"$(nproc)" tsan             # threads sharing objects, under ThreadSanitizer
step valgrind make valgrind-cli              # the CLI tests under valgrind memcheck
step fuzz bash scripts/fuzz.sh 15            # each libFuzzer target for 15 s; fails on any crash
step asan make -j"$(nproc)" asan CC=clang    # clang: see above
echo "== times:$times"
