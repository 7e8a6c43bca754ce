#!/usr/bin/env bash
# The test suite: builds and runs every test, then again under
# AddressSanitizer + UndefinedBehaviorSanitizer.  Each run ends with a line
# "N passed, N failed"; the script fails if any test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
make -j"$(nproc)" >/dev/null
make test
bash scripts/fuzz.sh 60 # each libFuzzer target for 60 s; fails on any crash
make -j"$(nproc)" asan
