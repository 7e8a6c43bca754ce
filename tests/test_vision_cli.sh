#!/usr/bin/env bash
# test_vision_cli.sh — `ropeattn attention --vision`: the attention layer of
# a checkpoint's vision encoder (tests/fixtures/vision, made by
# tests/fixtures/make_vision_fixtures.py from transformers' own modules in
# float64: Pixtral's and Qwen2-VL's with two images packed (--cu-seqlens),
# Qwen2.5-VL's and Llama 4's with one): y and --grads (dL/dx and each
# tensor's gradient, for dy.npy) against transformers' within 1e-5 of max|ref|
# (float32 sums; seen: y 1.4e-7 to 4.7e-7), and the refusals.
# Prints "vision_cli: N passed, N failed" last; exits 1 if anything failed.
SUITE=vision_cli
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

F=tests/fixtures/vision
for c in pixtral qwen2_vl qwen2_5_vl llama4; do
    d=$F/$c
    if "$RA" attention --weights "$d" --input "$d/x.npy" --output "$TMP/$c.npy" \
        --positions "$d/positions.npy" --cu-seqlens "$d/cu_seqlens.npy" --vision --layer 0 \
        --grad-output "$d/dy.npy" --grads "$TMP/$c.safetensors" 2>"$TMP/err"; then
        if "$PY" - "$TMP/$c.npy" "$d/y.npy" "$TMP/$c.safetensors" "$d/grads.npz" <<'PY'; then
import sys
sys.path.insert(0, "tests")
import numpy as np
from st_read import read_f32
y, want = np.load(sys.argv[1]), np.load(sys.argv[2])
e = np.abs(y - want).max() / np.abs(want).max()
got, ref = read_f32(sys.argv[3]), np.load(sys.argv[4])
g = max(np.abs(got[k].reshape(ref[k].shape) - ref[k]).max() / np.abs(ref[k]).max() for k in ref.files)
print(f"{sys.argv[2]}: y {e:.2g} of max|y|, gradients {g:.2g} of max")
sys.exit(0 if y.shape == want.shape and sorted(got) == sorted(ref.files) and e <= 1e-5
         and g <= 1e-5 else 1)
PY
            pass
        else
            fail "$c: y or gradients"
        fi
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
