#!/usr/bin/env bash
# The test suite: builds and runs every test; the allocation-failure test,
# ThreadSanitizer and valgrind runs (Makefile); libFuzzer on every target;
# then the suite again under AddressSanitizer + UndefinedBehaviorSanitizer,
# built by clang (as the fuzz targets are) where the other steps build with
# cc (GCC): so both compilers build the library and its SIMD kernels and
# pass the whole suite, at no extra build.
# The steps run in two lanes side by side (RA_CI_LANES=1: one after the
# other): each step leaves a CPU idle for part of its time (a suite's last
# test, valgrind's longest suite, a link), which the other lane's step
# takes.  Lane 1 builds and tests the plain build, then runs valgrind on it,
# ThreadSanitizer and the fuzz targets; lane 2 runs the ASan build (the
# longest step: ThreadSanitizer after it ran alone at the end, for about
# 200 s of a 1166 s run, docs/TESTING.md).  The fuzz targets
# link the ASan build's SIMD kernels (FUZZ_KERNELS=asan, fuzz/fuzz.mk:
# their own build with coverage is for long runs): whichever step comes
# first builds them (make asan-kernels, under a lock), the other finds them
# up to date.  Each step's output is printed whole when it ends, headed by
# its name.
# Each run ends with a summary ("N passed, N failed"); the script fails if
# any test failed.  Each step's wall time is printed after it ("== step:
# N s"), and all of them at the end, so CI logs show where the time goes.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
step() { # name, command...: runs it into its log, prints the log and its wall time
    local name=$1 start=$SECONDS rc=0
    shift
    "$@" >"$logs/$name.log" 2>&1 || rc=$?
    {
        flock 9
        echo "== $name (exit $rc)"
        cat "$logs/$name.log"
        echo "== $name: $((SECONDS - start)) s"
        echo "  $name $((SECONDS - start)) s;" >>"$logs/times"
    } 9>"$logs/lock"
    return $rc
}
lane1() {
    step build make -s -j"$(nproc)" &&
    step test make test &&
    step valgrind make valgrind-cli &&          # the CLI tests under valgrind memcheck
    step tsan make -j"$(nproc)" tsan &&         # threads sharing objects, under ThreadSanitizer
    # each libFuzzer target on its whole seed corpus (which holds an input for each
    # edge a 60 s run reached), then 5 s of mutations; fails on any crash
    # (docs/TESTING.md: that covers more than 15 s from the old corpus did)
    step fuzz env FUZZ_KERNELS=asan FUZZ_BUILD=build/fuzz-ci bash scripts/fuzz.sh 5
}
lane2() {
    step asan make -j"$(nproc)" asan CC=clang && # clang: see above; the fuzz targets' too
    # each allocation of each public path failing, under ASan+LSan: in the
    # ASan build (its objects carry the failure hooks; Makefile)
    step alloc-test make -j"$(nproc)" alloc-test CC=clang ALLOC_BUILD=build-asan
}
step install-deps bash scripts/install-deps.sh
rc=0
if [ "${RA_CI_LANES:-2}" = 1 ]; then
    lane1 || rc=1
    lane2 || rc=1
else
    lane1 & one=$!
    lane2 & two=$!
    wait $one || rc=1
    wait $two || rc=1
fi
echo "== times:$(tr -d '\n' <"$logs/times")"
exit $rc
