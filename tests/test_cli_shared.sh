#!/usr/bin/env bash
# test_cli_shared.sh — the CLI on the public API, linked against the shared
# libraries (issue 42; `make cli-shared`: $BUILD/shared/ropeattn): that it
# loads this build's libropeattn_hf.so.0 and libropeattn.so.0 (its rpath)
# and holds no copy of them; then a sample that reaches every command of
# it: three checkpoint cases of tests/test_hf.sh (attention's forward,
# cached steps and gradients, freqs and convert-layout against
# transformers' numbers) and rope and families, byte for byte the static
# CLI's.  tests/test_cli.sh runs the whole CLI matrix with the static CLI,
# built from the same sources (the plain build; below).
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
cases='@(llama_yarn|gemma2_softcap_window|deepseek_v3)'
if RA_CLI=$SHARED RA_CASE=$cases bash tests/test_hf.sh >"$TMP/hf.out" 2>&1; then pass
else fail "tests/test_hf.sh $cases with $SHARED: $(grep -E '^FAIL|passed' "$TMP/hf.out" | head -20)"; fi
tail -n 1 "$TMP/hf.out"
$PY -c 'import numpy as np; np.save("'"$TMP"'/x.npy", np.random.default_rng(1).standard_normal((2, 5, 3, 8), dtype=np.float32))'
for kind in static shared; do
    cli=$BUILD/ropeattn
    [ $kind = shared ] && cli=$SHARED
    "$cli" rope --input "$TMP/x.npy" --output "$TMP/y-$kind.npy" --layout half \
        --start-pos 7 --rope-parameters '{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 32}' \
        --max-position-embeddings 128 || fail "$cli rope"
    "$cli" families >"$TMP/families-$kind.txt" || fail "$cli families"
done
if cmp -s "$TMP/y-static.npy" "$TMP/y-shared.npy"; then pass
else fail "rope: the shared CLI's output differs from the static CLI's"; fi
if cmp -s "$TMP/families-static.txt" "$TMP/families-shared.txt"; then pass
else fail "families: the shared CLI's list differs from the static CLI's"; fi
summary
