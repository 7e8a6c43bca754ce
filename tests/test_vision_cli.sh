#!/usr/bin/env bash
# test_vision_cli.sh — `ropeattn attention --vision`: the attention layer of
# a checkpoint's vision encoder (tests/fixtures/vision, made by
# tests/fixtures/make_vision_fixtures.py from transformers' own modules in
# float64: Pixtral's and Qwen2-VL's with two images packed (--cu-seqlens),
# Qwen2.5-VL's and Llama 4's with one) against y.npy within 1e-5 of max|y|
# (float32 sums; seen: Pixtral 1.4e-7, Qwen2-VL 4.3e-7, Qwen2.5-VL 1.8e-7,
# Llama 4 4.7e-7), and the refusals.
# Prints "vision_cli: N passed, N failed" last; exits 1 if anything failed.
SUITE=vision_cli
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

F=tests/fixtures/vision
for c in pixtral qwen2_vl qwen2_5_vl llama4; do
    d=$F/$c
    if "$RA" attention --weights "$d" --input "$d/x.npy" --output "$TMP/$c.npy" \
        --positions "$d/positions.npy" --cu-seqlens "$d/cu_seqlens.npy" --vision --layer 0 \
        2>"$TMP/err"; then
        if "$PY" - "$TMP/$c.npy" "$d/y.npy" <<'PY'; then pass; else fail "$c: y"; fi
import sys
import numpy as np
y, want = np.load(sys.argv[1]), np.load(sys.argv[2])
e = np.abs(y - want).max() / np.abs(want).max()
print(f"{sys.argv[2]}: {e:.2g} of max|y|")
sys.exit(0 if y.shape == want.shape and e <= 1e-5 else 1)
PY
    else
        fail "$c: $(cat "$TMP/err")"
    fi
done

refused() { # status, text, args...: the run fails with that status, naming text
    local want=$1 text=$2
    shift 2
    "$RA" attention "$@" --output "$TMP/out.npy" 2>"$TMP/err"
    local got=$?
    if [ "$got" -eq "$want" ] && grep -q -- "$text" "$TMP/err" && [ ! -e "$TMP/out.npy" ]; then
        pass
    else
        fail "refused $text: status $got: $(cat "$TMP/err")"
    fi
}
d=$F/qwen2_5_vl
args=(--weights "$d" --input "$d/x.npy" --positions "$d/positions.npy" --vision)
refused 2 "needs --layer" "${args[@]}"
refused 2 "\-\-n-heads is not taken" "${args[@]}" --layer 0 --n-heads 3
refused 2 "\-\-prefill is not taken" "${args[@]}" --layer 0 --prefill 4
refused 1 "fullatt_block_indexes" "${args[@]}" --layer 1
refused 1 "(row, column) pairs" --weights "$d" --input "$d/x.npy" --vision --layer 0 \
    --positions "$F/llama4/positions.npy"
refused 2 "needs --positions" --weights "$d" --input "$d/x.npy" --vision --layer 0
refused 2 "cu-seqlens is --vision" --weights "$d" --input "$d/x.npy" --layer 0 \
    --cu-seqlens "$d/cu_seqlens.npy"
refused 1 "cu-seqlens is \[n + 1\]" "${args[@]}" --layer 0 --cu-seqlens "$d/positions.npy"
refused 1 "cu_seqlens" "${args[@]}" --layer 0 --cu-seqlens "$F/qwen2_vl/cu_seqlens.npy"
summary
