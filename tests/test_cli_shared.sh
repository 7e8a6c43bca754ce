#!/usr/bin/env bash
# test_cli_shared.sh — the CLI on the public API, linked against the shared
# libraries (issue 42; `make cli-shared`: $BUILD/shared/ropeattn): that it
# loads this build's libropeattn_hf.so.0 and libropeattn.so.0 (its rpath),
# and tests/test_cli.sh run with it (RA_CLI): every command, on the public
# calls of libropeattn_hf and libropeattn alone (the plain build; below).
SUITE=cli_shared
source "$(dirname "$0")/shell_common.sh"
SHARED=$BUILD/shared/ropeattn
if [ ! -x "$SHARED" ]; then fail "$SHARED is not built (make cli-shared)"; summary; fi
for lib in libropeattn_hf.so.0 libropeattn.so.0; do
    if ldd "$SHARED" | grep -q "^[[:space:]]*$lib => $BUILD/shared/\.\./$lib "; then pass
    else fail "$SHARED does not load $BUILD/$lib: $(ldd "$SHARED" | grep ropeattn)"; fi
done
if nm "$SHARED" | grep -q " T ra_hf_layer_create$"; then
    fail "$SHARED holds libropeattn_hf's code: it must link the shared library"
else pass; fi
# The sanitizer builds (make asan) run the suite with the static CLI; the
# shared one's code is the same, so there it answers --version and families.
if grep -qa __asan_init "$SHARED"; then
    if "$SHARED" --version >/dev/null && "$SHARED" families | grep -q "^llama	"; then pass
    else fail "$SHARED --version, families"; fi
    summary
fi
if RA_CLI=$SHARED bash tests/test_cli.sh >"$TMP/cli.out" 2>&1; then pass
else fail "tests/test_cli.sh with $SHARED: $(grep -E '^FAIL|passed' "$TMP/cli.out" | head -20)"; fi
tail -n 1 "$TMP/cli.out"
summary
