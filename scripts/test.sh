#!/usr/bin/env bash
# The test suite: builds and runs every test; the allocation-failure test,
# ThreadSanitizer and valgrind runs (Makefile); then the suite again under
# AddressSanitizer + UndefinedBehaviorSanitizer.  Each run ends with a
# summary ("N passed, N failed"); the script fails if any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
make -j"$(nproc)" >/dev/null
make test
make -j"$(nproc)" alloc-test   # each allocation of each public path failing, under ASan+LSan
make -j"$(nproc)" tsan         # threads sharing objects, under ThreadSanitizer
make valgrind-cli              # the CLI tests under valgrind memcheck
bash scripts/fuzz.sh 60 # each libFuzzer target for 60 s; fails on any crash
make -j"$(nproc)" asan
