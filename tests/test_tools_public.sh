#!/usr/bin/env bash
# test_tools_public.sh — the user's CLI (tools/) on the public API alone
# (issue 42): each of its #include "..." names a header of tools/ itself or
# a public one (include/), never one of src/ (the libraries' insides); `make
# cli-shared` compiles it without src/ on the include path and links it
# against the shared libraries, which tests/test_cli_shared.sh runs.
SUITE=tools_public
cd "$(dirname "$0")/.."
passed=0 failed=0
for f in tools/*.c tools/*.h tools/mpi/*.c; do
    [ -f "$f" ] || continue
    while IFS= read -r header; do
        if [ -f "include/$header" ] || { [[ $header != */* ]] && [ -f "tools/$header" ]; }; then
            passed=$((passed + 1))
        else
            echo "FAIL: $f includes \"$header\", which is neither tools/'s nor public (include/)"
            failed=$((failed + 1))
        fi
    done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done
echo "$SUITE: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
