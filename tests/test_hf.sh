#!/usr/bin/env bash
# test_hf.sh — the command line on checkpoints made by Hugging Face
# transformers itself, against the outputs of its own modeling code.
#
# Each folder tests/hf/<case>/ holds what tests/hf/make_hf_cases.py wrote on
# a machine with transformers 5.17.0 and torch 2.11: a tiny model saved by
# save_pretrained (config.json in that version's form, model.safetensors in
# F32, F16 or BF16), layer L's self_attn input X and output Y, the position_ids,
# the rotary cos/sin it used and, for some cases, DY and torch autograd's dL/dX
# and dL/dW for L = sum(Y * DY).  Every rope type (default, linear, dynamic
# below and above its length, yarn with and without mscale, llama3, longrope
# short and long), head_dim with H * head_dim != hidden_size, GQA 1:1 to 4:1,
# partial rotary (StableLM), q/k/v biases (Qwen2), q/k norms (Qwen3), a
# second layer; latent attention (DeepSeek-V2-Lite's and V3's shapes, made
# by make_hf_cases.py's mla_cases once transformers with DeepSeek runs it).
#
# Tolerances, relative to max|ref| (HF itself computes in float32; its own
# float32 against float64 differs by up to 1e-6 on these cases, and we see
# up to 7e-7 against it):
#   Y, the decode path with an f32 cache, dL/dX and dL/dW   1e-5
#   Y with an f16 / bf16 cache                              5e-3 / 3e-2
#   cos and sin (absolute)                                  2e-6
#
# Prints "hf: N passed, N failed" last; exits 1 if anything failed.
SUITE=hf
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

cat >"$TMP/check.py" <<'PY'
"""Comparisons for test_hf.sh (numpy only)."""
import json, sys
import numpy as np

def rel(got, want):
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return np.inf
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))

from st_read import read_f32 as read_safetensors

def main(cmd, *args):
    if cmd == "field":  # case.json field
        print(json.load(open(args[0]))[args[1]]); return 0
    if cmd == "half_seq":
        print(max(1, np.load(args[0]).shape[1] // 2)); return 0
    if cmd == "y":
        got, want, tol = np.load(args[0]), np.load(args[1]), float(args[2])
        e = rel(got, want)
    elif cmd == "table":  # ours [B, S, R/2] (or flat) against HF's [B, S, R]
        got, want, tol = np.load(args[0]), np.load(args[1]), float(args[2])
        half = want[..., : want.shape[-1] // 2].reshape(-1)
        got = got.reshape(-1)
        e = float(np.max(np.abs(got - half))) if got.shape == half.shape else np.inf
    elif cmd == "full_table":  # ours [n, R] against HF's [B, S, R]
        got, want, tol = np.load(args[0]), np.load(args[1]), float(args[2])
        want = want.reshape(-1, want.shape[-1])
        e = float(np.max(np.abs(got - want))) if got.shape == want.shape else np.inf
    elif cmd == "grads":
        got, want, tol = read_safetensors(args[0]), dict(np.load(args[1])), float(args[2])
        if sorted(got) != sorted(want):
            print(f"tensors {sorted(got)}, expected {sorted(want)}"); return 1
        e = max(rel(got[k], want[k]) for k in want)
    else:
        raise SystemExit(f"unknown command {cmd}")
    if e > tol:
        print(f"{cmd}: {e:.3g} > {tol:g}"); return 1
    return 0

sys.exit(main(*sys.argv[1:]))
PY
check() { "$PY" "$TMP/check.py" "$@"; }

# attention NAME CASE REF TOL -- EXTRA ARGS: runs the layer of CASE and
# compares the output with CASE/REF.
attention() {
    local name=$1 dir=$2 ref=$3 tol=$4; shift 5
    local layer; layer=$(check field "$dir/case.json" layer)
    rm -f "$TMP/y.npy"
    if ! "$RA" attention --weights "$dir/model.safetensors" --config "$dir/config.json" \
        --layer "$layer" --input "$dir/x.npy" --positions "$dir/pos.npy" \
        --output "$TMP/y.npy" "$@" 2>"$TMP/err"; then
        fail "$name: $(cat "$TMP/err")"
    elif check y "$TMP/y.npy" "$dir/$ref" "$tol"; then pass; else fail "$name"; fi
}

cases=0
for dir in tests/hf/*/; do
    dir=${dir%/}
    [ -f "$dir/case.json" ] || continue
    c=$(basename "$dir")
    cases=$((cases + 1))
    attention "$c: y" "$dir" y.npy 1e-5 --
    p=$(check half_seq "$dir/x.npy")
    if [ "$c" = llama_dynamic_long ]; then
        # past max_position_embeddings each step's length gives the dynamic
        # rope other frequencies than the whole input's: transformers' cached
        # generation is not this y, and --prefill is refused
        if "$RA" attention --weights "$dir/model.safetensors" --config "$dir/config.json" \
            --layer "$(check field "$dir/case.json" layer)" --input "$dir/x.npy" \
            --positions "$dir/pos.npy" --output "$TMP/y.npy" --prefill "$p" 2>"$TMP/err"; then
            fail "$c: --prefill with a dynamic rope past its length ran"
        elif grep -q "prefill with rope type dynamic: the step of tokens 0.. sees" "$TMP/err"; then
            pass
        else fail "$c: --prefill refused for another reason: $(cat "$TMP/err")"
        fi
        # --seq-len fixes the length for every step: the no-cache y, as asked
        attention "$c: y, prefill $p then decode, --seq-len" "$dir" y.npy 1e-5 -- --prefill "$p" \
            --seq-len "$("$PY" -c "import numpy; print(int(numpy.load('$dir/pos.npy').max()) + 1)")"
    else
        attention "$c: y, prefill $p then decode, f32 cache" "$dir" y.npy 1e-5 -- --prefill "$p"
        attention "$c: y, prefill $p then decode, f16 cache" "$dir" y.npy 5e-3 -- \
            --prefill "$p" --cache-dtype f16
        attention "$c: y, prefill 1 then decode, bf16 cache" "$dir" y.npy 3e-2 -- \
            --prefill 1 --cache-dtype bf16
        # 8-bit caches: seen up to 0.017 (int8) and 0.079 (fp8) of max|y| on
        # these cases (bf16: 0.0064); bounds about twice that (README,
        # "Tolerances")
        attention "$c: y, prefill $p then decode, int8 cache" "$dir" y.npy 3e-2 -- \
            --prefill "$p" --cache-dtype int8
        attention "$c: y, prefill 1 then decode, fp8 cache" "$dir" y.npy 1.5e-1 -- \
            --prefill 1 --cache-dtype fp8 --cache-scale 0.25
    fi
    rm -f "$TMP/cos.npy" "$TMP/sin.npy"
    # freqs: the config's global rope, where the layer rotates by it
    # (case.json's "freqs" false: no tables; cases made before it have them)
    has_freqs=$(check field "$dir/case.json" freqs 2>/dev/null || echo True)
    if [ ! -f "$dir/cos.npy" ] && [ "$has_freqs" != False ]; then
        fail "$c: no cos.npy, and case.json does not say freqs false"
    elif [ ! -f "$dir/cos.npy" ]; then :
    elif ! "$RA" freqs --config "$dir/config.json" --positions "$dir/pos.npy" \
        --cos "$TMP/cos.npy" --sin "$TMP/sin.npy" 2>"$TMP/err"; then
        fail "$c: freqs: $(cat "$TMP/err")"
    elif check table "$TMP/cos.npy" "$dir/cos.npy" 2e-6 &&
        check table "$TMP/sin.npy" "$dir/sin.npy" 2e-6; then pass
    else fail "$c: freqs"
    fi
    # --hf-shape: the whole [n, rotary_dim] table transformers returns.
    rm -f "$TMP/cos.npy" "$TMP/sin.npy"
    if [ ! -f "$dir/cos.npy" ]; then :
    elif ! "$RA" freqs --config "$dir/config.json" --positions "$dir/pos.npy" --hf-shape \
        --cos "$TMP/cos.npy" --sin "$TMP/sin.npy" 2>"$TMP/err"; then
        fail "$c: freqs --hf-shape: $(cat "$TMP/err")"
    elif check full_table "$TMP/cos.npy" "$dir/cos.npy" 2e-6 &&
        check full_table "$TMP/sin.npy" "$dir/sin.npy" 2e-6; then pass
    else fail "$c: freqs --hf-shape"
    fi
    # convert-layout to interleaved (q/k rows, biases and norms per head),
    # then the same Y with --layout interleaved; latent attention (case.json
    # "mla") is refused, its rope rows not converted
    rm -f "$TMP/inter.safetensors"
    mla=$(check field "$dir/case.json" mla 2>/dev/null || echo False)
    if [ "$mla" = True ]; then
        "$RA" convert-layout --weights "$dir/model.safetensors" --output "$TMP/inter.safetensors" \
            --to half --config "$dir/config.json" 2>"$TMP/err"
        if [ $? -eq 1 ] && grep -q "is latent attention" "$TMP/err" &&
            [ ! -e "$TMP/inter.safetensors" ]; then pass
        else fail "$c: convert-layout on latent attention: $(cat "$TMP/err")"; fi
    elif ! "$RA" convert-layout --weights "$dir/model.safetensors" --output "$TMP/inter.safetensors" \
        --to interleaved --config "$dir/config.json" 2>"$TMP/err"; then
        fail "$c: convert-layout: $(cat "$TMP/err")"
    else
        layer=$(check field "$dir/case.json" layer)
        rm -f "$TMP/y.npy"
        if "$RA" attention --weights "$TMP/inter.safetensors" --config "$dir/config.json" \
            --layer "$layer" --input "$dir/x.npy" --positions "$dir/pos.npy" \
            --output "$TMP/y.npy" --layout interleaved 2>"$TMP/err" &&
            check y "$TMP/y.npy" "$dir/y.npy" 1e-5; then pass
        else fail "$c: y after convert-layout --to interleaved: $(cat "$TMP/err")"
        fi
    fi
    if [ -f "$dir/grads.npz" ]; then
        rm -f "$TMP/g.safetensors"
        attention "$c: y with --grads" "$dir" y.npy 1e-5 -- \
            --grad-output "$dir/dy.npy" --grads "$TMP/g.safetensors"
        if [ -f "$TMP/g.safetensors" ] && check grads "$TMP/g.safetensors" "$dir/grads.npz" 1e-5
        then pass; else fail "$c: gradients"
        fi
    fi
done
[ "$cases" -ge 13 ] || fail "only $cases cases under tests/hf"

# longrope through a cache: a prompt at or below original_max_position_embeddings
# (16) and steps past it would rotate with short and then long factors in
# transformers: refused.  Every step past it: the no-cache Y.
D=tests/hf/llama_longrope_short
LR=(attention --weights "$D/model.safetensors" --config "$D/config.json" --input "$D/x.npy")
if "$RA" "${LR[@]}" --start-pos 10 --prefill 4 --output "$TMP/y.npy" 2>"$TMP/err"; then
    fail "longrope --prefill across original_max_position_embeddings ran"
elif grep -q "prefill with rope type longrope: the step of tokens 0.. sees length 14" "$TMP/err"; then
    pass
else fail "longrope --prefill refused for another reason: $(cat "$TMP/err")"; fi
if "$RA" "${LR[@]}" --start-pos 20 --output "$TMP/y.npy" 2>"$TMP/err" &&
    "$RA" "${LR[@]}" --start-pos 20 --prefill 4 --output "$TMP/y_cached.npy" 2>>"$TMP/err" &&
    check y "$TMP/y_cached.npy" "$TMP/y.npy" 1e-5; then pass
else fail "longrope --prefill past original_max_position_embeddings: $(cat "$TMP/err")"; fi
summary
