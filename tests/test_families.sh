#!/usr/bin/env bash
# test_families.sh — `ropeattn attention` on tiny checkpoints of each model
# family (the tensor names and config keys of its Hugging Face releases),
# against float64 references written from transformers' modeling code
# (tests/families/make_family_cases.py), block-FP8 checkpoints among them
# (tests/families/fp8_cases.py: weights quantized and dequantized in numpy
# as transformers does, the reference on the dequantized weights); and the
# families and keys that must be refused, each with its message, exit code
# 1 and no output file.
# `ropeattn rope --config` takes its layout from the config, on [B, S, H, D]
# and (--shape bhsd) [B, H, S, D].
#
# Tolerance, relative to max|ref|: 1e-5 (float32 against float64 on a
# 12-token layer; seen up to 3e-7), the same through the KV cache (latent
# attention's decode, with kv_b_proj absorbed into q and the output, against
# the float64 layer that expands every head's key and value).
#
# Prints "families: N passed, N failed" last; exits 1 if anything failed.
SUITE=families
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

if ! "$PY" tests/families/make_family_cases.py "$TMP/cases"; then
    fail "tests/families/make_family_cases.py"; summary
fi
cat >"$TMP/check.py" <<'PY'
import json, sys
import numpy as np
cmd, *args = sys.argv[1:]
if cmd == "field":
    v = json.load(open(args[0]))[args[1]]
    print(" ".join(v) if isinstance(v, list) else ("" if v is None else v))
    sys.exit(0)
if cmd == "table":  # cases: a line per case: name, layer, refused, args (0x1f between)
    import os
    for name in sorted(os.listdir(args[0])):
        if name == "rope":
            continue
        case = json.load(open(os.path.join(args[0], name, "case.json")))
        row = [case[k] for k in ("layer", "refused", "args")]
        print("\x1f".join([name] + [" ".join(v) if isinstance(v, list) else
                                   ("" if v is None else str(v)) for v in row]))
    sys.exit(0)
if cmd == "ys":  # tol list: a line per "want got" line of list, "ok" or how it differs
    tol = float(args[0])
    for line in open(args[1]):
        want, path = line.split()
        want = np.load(want)
        try:
            got = np.load(path)
        except OSError:
            print("no output"); continue
        e = (np.inf if got.shape != want.shape
             else float(np.max(np.abs(got - want)) / np.max(np.abs(want))))
        print("ok" if e <= tol else f"differs by {e:.3g} of max|ref| (tolerance {tol})")
    sys.exit(0)
got, want, tol = np.load(args[0]), np.load(args[1]), float(args[2])
e = np.inf if got.shape != want.shape else float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
if not e <= tol:
    print(f"differs by {e:.3g} of max|ref| (tolerance {tol})")
    sys.exit(1)
PY
field() { "$PY" "$TMP/check.py" field "$1/case.json" "$2"; }

# One Python start reads every case.json, one compares every output (each
# start costs more than the case's three runs).
"$PY" "$TMP/check.py" table "$TMP/cases" >"$TMP/table" || fail "reading the cases' case.json"
: >"$TMP/compare"; : >"$TMP/compared"
# Under ASan (runs ~5 times a plain one's) each case that runs decodes in
# one mode, prefill5 and prefill1 in turn (RA_FAMILIES_FULL=1: both): each
# family's layer and its cached decode still run under it, and every
# refusal; the plain build runs every case in every mode.
full_modes=1
asan_build && full_modes=0
full_modes=${RA_FAMILIES_FULL:-$full_modes} running=0
while IFS=$'\x1f' read -r name layer refused argline; do
    dir=$TMP/cases/$name
    case_chosen "$name" || continue
    read -r -a extra <<<"$argline"
    [ -e "$dir/positions.npy" ] && extra+=(--positions "$dir/positions.npy")
    args=(attention --weights "$dir/model.safetensors" --config "$dir/config.json"
          --input "$dir/x.npy" --output "$dir/got.npy" ${layer:+--layer "$layer"} "${extra[@]}")
    if [ -n "$refused" ]; then
        "$RA" "${args[@]}" 2>"$TMP/err"
        code=$?
        if [ "$code" -ne 1 ]; then fail "$name: exit code $code, expected 1 ($(cat "$TMP/err"))"
        elif ! grep -qF -- "$refused" "$TMP/err"; then
            fail "$name: expected /$refused/, got: $(cat "$TMP/err")"
        elif [ "$(wc -l <"$TMP/err")" -ne 1 ]; then fail "$name: not one message line"
        elif [ -e "$dir/got.npy" ]; then fail "$name: an output was written"
        else pass; fi
        continue
    fi
    # --prefill 5 and 1: windows of 4 and 5 decode from rolling caches (of
    # 8 or 9 and 4 or 5 slots: the ring wraps); chunks of 8 from a full
    # cache under --prefill 5, from a ring of 8 under --prefill 1.
    # Each mode's output to got_MODE.npy, compared after the loop.
    modes=(plain prefill5 prefill1) ran=()
    running=$((running + 1))
    [ "$full_modes" = 1 ] || modes=(plain "${modes[1 + running % 2]}")
    for mode in "${modes[@]}"; do
        more=()
        [ $mode != plain ] && more=(--prefill "${mode#prefill}")
        rm -f "$dir/got.npy" "$dir/got_$mode.npy"
        if ! "$RA" "${args[@]}" "${more[@]}" 2>"$TMP/err"; then
            fail "$name ($mode): $(cat "$TMP/err")"
        else
            mv "$dir/got.npy" "$dir/got_$mode.npy" && ran+=("$mode")
        fi
    done
    for mode in "${ran[@]}"; do
        echo "$dir/y.npy $dir/got_$mode.npy" >>"$TMP/compare"
        echo "$name ($mode)" >>"$TMP/compared"
    done
done <"$TMP/table"
mapfile -t compared <"$TMP/compared"
i=0
while read -r out; do
    if [ "$out" = ok ]; then pass; else fail "${compared[$i]}: $out"; fi
    i=$((i + 1))
done < <("$PY" "$TMP/check.py" ys 1e-5 "$TMP/compare")
[ $i -eq ${#compared[@]} ] || fail "$i results for ${#compared[@]} outputs"

# Llama 4's NoPE layers scale q by the token's place (cache_position):
# --positions is refused there (a usage error, exit 2).
C=$TMP/cases
"$PY" -c "import numpy as np, sys; np.save(sys.argv[1], np.tile(np.arange(12), (2, 1)))" \
    "$TMP/pos.npy"
"$RA" attention --weights "$C/llama4_layer3/model.safetensors" \
    --config "$C/llama4_layer3/config.json" --input "$C/llama4_layer3/x.npy" \
    --output "$TMP/l4.npy" --layer 3 --positions "$TMP/pos.npy" 2>"$TMP/err"
if [ $? -eq 2 ] && grep -q "not by position ids" "$TMP/err" && [ ! -e "$TMP/l4.npy" ]; then pass
else fail "llama4 NoPE layer with --positions: $(cat "$TMP/err")"; fi

# Qwen3-VL's [4, B, S] position ids (text positions, then the 3-D rows):
# the 3-D rows move RoPE (the text row's values size no table), so the
# output is the [3, B, S] run's bit for bit;
# text positions that restart (a packed document to transformers' mask when
# it has no attention mask) are refused without --packed, taken with it.
q3=$C/qwen3_vl_image
"$PY" - "$q3/positions.npy" "$TMP/pos4.npy" "$TMP/pos4_packed.npy" <<'PY'
import sys
import numpy as np
p = np.load(sys.argv[1])  # [3, S] or [3, B, S]
text = np.broadcast_to(np.arange(p.shape[-1]), p.shape[1:])
np.save(sys.argv[2], np.concatenate([text[None] + 2**31, p]))  # far away: only steps count
half = p.shape[-1] // 2
np.save(sys.argv[3], np.concatenate([(text - (text >= half) * half)[None], p]))
PY
run_q3() { # positions output [more arguments]
    "$RA" attention --weights "$q3/model.safetensors" --config "$q3/config.json" \
        --layer "$(field "$q3" layer)" --input "$q3/x.npy" --positions "$1" --output "$2" "${@:3}"
}
rm -f "$TMP/q3_3.npy" "$TMP/q3_4.npy" "$TMP/q3_p.npy" "$TMP/q3_pk.npy"
if run_q3 "$q3/positions.npy" "$TMP/q3_3.npy" 2>"$TMP/err" &&
    run_q3 "$TMP/pos4.npy" "$TMP/q3_4.npy" 2>>"$TMP/err" && cmp -s "$TMP/q3_3.npy" "$TMP/q3_4.npy"
then pass; else fail "qwen3_vl [4, B, S] positions: $(cat "$TMP/err")"; fi
run_q3 "$TMP/pos4_packed.npy" "$TMP/q3_p.npy" 2>"$TMP/err"
if [ $? -eq 1 ] && grep -q "starts a packed document: add --packed" "$TMP/err" &&
    [ ! -e "$TMP/q3_p.npy" ]; then pass
else fail "qwen3_vl restarting text positions without --packed: $(cat "$TMP/err")"; fi
if run_q3 "$TMP/pos4_packed.npy" "$TMP/q3_pk.npy" --packed 2>"$TMP/err" &&
    ! cmp -s "$TMP/q3_3.npy" "$TMP/q3_pk.npy"; then pass
else fail "qwen3_vl --packed on text positions: $(cat "$TMP/err")"; fi

# Fused projections' gradients (Phi-3's qkv_proj, GPT-NeoX's query_key_value)
# are written as stored: the rows of the same weights' unfused gradients
# (Phi-3's bit for bit; GPT-NeoX's, read per head in place, to 1e-6).
grads() { # case: runs it with a DY of X's shape, writing $C/case/g.safetensors
    "$PY" -c "import numpy as np, sys; np.save(sys.argv[2], np.random.default_rng(1).normal(
size=np.load(sys.argv[1]).shape).astype(np.float32))" "$C/$1/x.npy" "$TMP/dy.npy"
    "$RA" attention --weights "$C/$1/model.safetensors" --config "$C/$1/config.json" \
        --input "$C/$1/x.npy" --output "$C/$1/y2.npy" --grad-output "$TMP/dy.npy" \
        --grads "$C/$1/g.safetensors" $(field "$C/$1" args) 2>"$TMP/err" ||
        fail "$1 --grads: $(cat "$TMP/err")"
}
for c in phi3 phi3_split gpt_neox gpt_neox_split stablelm_qk_layernorm stablelm_as_cohere; do
    grads $c
done

# Masks' gradients (Gemma 2's window and soft-cap, gpt-oss's window and
# sinks, Llama 4's chunks) and M-RoPE's (Qwen2-VL, Qwen2.5-VL, Qwen3-VL on
# 3-D positions): dL/dX and the sinks' gradient against central
# differences of the float64 layer (tests/families/make_family_cases.py),
# 5e-5 of the largest: float32 rounding through the softmax and Llama 4's
# L2 norm reaches 2e-5 on some draws (its forward 6e-6), the differences'
# own error is near 1e-9.
cat >"$TMP/masked_grads.py" <<'PY'
import sys
import numpy as np
from st_read import read_f32
g, d = read_f32(sys.argv[1]), sys.argv[2]
def close(a, b):
    return a.shape == b.shape and np.max(np.abs(a - b)) <= 5e-5 * np.max(np.abs(b))
ok = close(g["x"], np.load(d + "/gx.npy"))
sinks = [n for n in g if n.endswith(".sinks")]
if sinks:
    ok = ok and close(g[sinks[0]], np.load(d + "/g_sinks.npy"))
sys.exit(0 if ok else 1)
PY
for c in gemma2_layer0 gpt_oss_layer0 gpt_oss_layer1 llama4_chunks_layer0 qwen2_vl_image \
    qwen2_5_vl_video qwen3_vl_image; do
    rm -f "$C/$c/g.safetensors"
    pos=()
    [ -e "$C/$c/positions.npy" ] && pos=(--positions "$C/$c/positions.npy")
    if "$RA" attention --weights "$C/$c/model.safetensors" --config "$C/$c/config.json" \
        --layer "$(field "$C/$c" layer)" --input "$C/$c/x.npy" --output "$C/$c/y2.npy" \
        --grad-output "$C/$c/dy.npy" --grads "$C/$c/g.safetensors" "${pos[@]}" 2>"$TMP/err" &&
        "$PY" "$TMP/masked_grads.py" "$C/$c/g.safetensors" "$C/$c"; then pass
    else fail "$c --grads against float64 differences $(cat "$TMP/err")"; fi
done
cat >"$TMP/fused.py" <<'PY'
import sys
import numpy as np
from st_read import read_f32
fused, split = read_f32(sys.argv[1]), read_f32(sys.argv[2])
p = "model.layers.0.self_attn."
rows = np.concatenate([split[p + n + "_proj.weight"] for n in "qkv"])
ok = sorted(fused) == sorted(["x", p + "qkv_proj.weight", p + "o_proj.weight"])
ok = ok and np.array_equal(fused[p + "qkv_proj.weight"], rows)
ok = ok and np.array_equal(fused["x"], split["x"])
sys.exit(0 if ok else 1)
PY
if "$PY" "$TMP/fused.py" "$C/phi3/g.safetensors" "$C/phi3_split/g.safetensors"; then pass
else fail "phi3: the fused gradient is not the split gradients' rows"; fi

cat >"$TMP/neox.py" <<'PY'
import sys
import numpy as np
from st_read import read_f32
fused, split = read_f32(sys.argv[1]), read_f32(sys.argv[2])
p, s = "gpt_neox.layers.0.attention.", "model.layers.0.self_attn."
H, D = 4, 16
def per_head(parts):
    return np.stack([a.reshape(H, D, -1) for a in parts], 1).reshape(3 * H * D, -1)
def close(a, b):  # the layer reads the fused weight in place, a product per head
    return a.shape == b.shape and np.max(np.abs(a - b)) <= 1e-6 * np.max(np.abs(b))
w = per_head([split[s + n + "_proj.weight"] for n in "qkv"])
b = per_head([split[s + n + "_proj.bias"] for n in "qkv"])[:, 0]
ok = close(fused[p + "query_key_value.weight"], w)
ok = ok and close(fused[p + "query_key_value.bias"], b)
ok = ok and close(fused[p + "dense.weight"], split[s + "o_proj.weight"])
ok = ok and close(fused["x"], split["x"])
sys.exit(0 if ok else 1)
PY
if "$PY" "$TMP/neox.py" "$C/gpt_neox/g.safetensors" "$C/gpt_neox_split/g.safetensors"; then pass
else fail "gpt_neox: the fused gradient is not the split gradients' rows per head"; fi

# StableLM 2's per-head norm tensors get their heads' rows of the gradient
# that Cohere's [H, D] q_norm and k_norm get, with the same weights.
cat >"$TMP/heads.py" <<'PY'
import sys
import numpy as np
from st_read import read_f32
per_head, stacked = read_f32(sys.argv[1]), read_f32(sys.argv[2])
p = "model.layers.0.self_attn."
del stacked[p + "o_proj.bias"]  # Cohere's attention_bias biases o too (zero here)
ok = sorted(per_head) == sorted([n for n in stacked if "_norm." not in n] +
                                [p + "%s_layernorm.norms.%d.weight" % (m, h)
                                 for m, n in (("q", 4), ("k", 2)) for h in range(n)])
for m, n in (("q", 4), ("k", 2)):
    rows = np.stack([per_head[p + "%s_layernorm.norms.%d.weight" % (m, h)] for h in range(n)])
    ok = ok and np.array_equal(rows, stacked[p + m + "_norm.weight"])
ok = ok and all(np.array_equal(per_head[n], stacked[n]) for n in stacked if "_norm." not in n)
sys.exit(0 if ok else 1)
PY
if "$PY" "$TMP/heads.py" "$C/stablelm_qk_layernorm/g.safetensors" \
    "$C/stablelm_as_cohere/g.safetensors"; then pass
else fail "stablelm: the per-head norms' gradients are not Cohere's rows"; fi

# Latent attention (DeepSeek-V2, V3, Kimi K2; tests/families/mla_cases.py):
# the gradient of every weight, bias and norm and of X under the
# checkpoint's names, against central differences of the float64 layer,
# 1e-5 of each tensor's largest (seen up to 5e-7); decode steps over a
# latent cache against the same layer's plain forward, 1e-5 of max|Y| (seen
# 4e-7); a 16-bit latent cache (every latent and rotated key rounded once)
# against the float64 layer, 5e-3 (f16; seen 2e-4) and 3e-2 (bf16; seen
# 2e-3) as tests/test_hf.sh's caches.
cat >"$TMP/mla_grads.py" <<'PY'
import glob, os, sys
import numpy as np
from st_read import read_f32
g, d = read_f32(sys.argv[1]), sys.argv[2]
want = {"x": np.load(d + "/gx.npy")}
for path in glob.glob(d + "/g_*.npy"):
    want[os.path.basename(path)[2:-4]] = np.load(path)
if sorted(g) != sorted(want):
    print("tensors", sorted(g), "expected", sorted(want))
    sys.exit(1)
e = max(float(np.max(np.abs(g[n] - want[n])) / np.max(np.abs(want[n]))) for n in want)
if not e <= 1e-5:
    print(f"differs by {e:.3g} of max|ref| (tolerance 1e-5)")
    sys.exit(1)
PY
for c in deepseek_v2_lite deepseek_v3 deepseek_v3_half deepseek_v32; do
    rm -f "$C/$c/g.safetensors"
    if "$RA" attention --weights "$C/$c/model.safetensors" --config "$C/$c/config.json" \
        --layer "$(field "$C/$c" layer)" --input "$C/$c/x.npy" --output "$C/$c/y2.npy" \
        --grad-output "$C/$c/dy.npy" --grads "$C/$c/g.safetensors" 2>"$TMP/err" &&
        out=$("$PY" "$TMP/mla_grads.py" "$C/$c/g.safetensors" "$C/$c"); then pass
    else fail "$c --grads against float64 differences: $out $(cat "$TMP/err")"; fi
done
for c in deepseek_v2_lite deepseek_v3 deepseek_v3_half kimi_k2; do
    mla=(attention --weights "$C/$c/model.safetensors" --config "$C/$c/config.json"
         --layer "$(field "$C/$c" layer)" --input "$C/$c/x.npy")
    rm -f "$TMP/plain.npy" "$TMP/decode.npy"
    if "$RA" "${mla[@]}" --output "$TMP/plain.npy" 2>"$TMP/err" &&
        "$RA" "${mla[@]}" --output "$TMP/decode.npy" --prefill 1 2>>"$TMP/err" &&
        out=$("$PY" "$TMP/check.py" y "$TMP/decode.npy" "$TMP/plain.npy" 1e-5); then pass
    else fail "$c: decode steps against the plain forward: $out $(cat "$TMP/err")"; fi
    # 8-bit rows: the bounds of the other caches' CLI checks (test_hf.sh)
    for t in f16:5e-3 bf16:3e-2 int8:3e-2 fp8:1.5e-1; do
        rm -f "$TMP/decode.npy"
        if "$RA" "${mla[@]}" --output "$TMP/decode.npy" --prefill 5 --cache-dtype "${t%:*}" \
            2>"$TMP/err" &&
            out=$("$PY" "$TMP/check.py" y "$TMP/decode.npy" "$C/$c/y.npy" "${t#*:}"); then pass
        else fail "$c: ${t%:*} latent cache: $out $(cat "$TMP/err")"; fi
    done
done

# convert-layout knows a family's stored layout: Cohere's rows are interleaved.
"$RA" convert-layout --weights "$C/cohere/model.safetensors" --config "$C/cohere/config.json" \
    --to interleaved --output "$TMP/co.safetensors" 2>"$TMP/err"
if [ $? -eq 1 ] && grep -q 'model_type "cohere" stores q_proj and k_proj rows interleaved' \
    "$TMP/err" && [ ! -e "$TMP/co.safetensors" ]; then pass
else fail "convert-layout --to interleaved on Cohere: $(cat "$TMP/err")"; fi

# freqs on DeepSeek-V3's config: yarn over qk_rope_head_dim features, its
# attention factor folded in (2e-6, as tests/test_hf.sh's tables); with
# --hf-shape the cat(t, t) transformers' DeepseekV3 returns.
rm -f "$TMP/cos.npy" "$TMP/sin.npy"
if "$RA" freqs --config "$C/deepseek_v3/config.json" --end 12 --cos "$TMP/cos.npy" \
    --sin "$TMP/sin.npy" 2>"$TMP/err" &&
    "$RA" freqs --config "$C/deepseek_v3/config.json" --end 12 --hf-shape \
        --cos "$TMP/cos_hf.npy" --sin "$TMP/sin_hf.npy" 2>>"$TMP/err" &&
    "$PY" -c "import numpy as np, sys
got, hf, want = (np.load(sys.argv[i]) for i in (1, 2, 3))
ok = got.shape == want.shape and np.max(np.abs(got - want)) <= 2e-6
sys.exit(0 if ok and np.array_equal(hf, np.concatenate([got, got], -1)) else 1)" \
        "$TMP/cos.npy" "$TMP/cos_hf.npy" "$C/deepseek_v3/cos.npy"; then pass
else fail "freqs on DeepSeek-V3's config: $(cat "$TMP/err")"; fi

# convert-layout does not convert latent attention's rope rows.
"$RA" convert-layout --weights "$C/deepseek_v3/model.safetensors" \
    --config "$C/deepseek_v3/config.json" --to half --output "$TMP/ds.safetensors" 2>"$TMP/err"
if [ $? -eq 1 ] && grep -q 'model_type "deepseek_v3" is latent attention' "$TMP/err" &&
    [ ! -e "$TMP/ds.safetensors" ]; then pass
else fail "convert-layout on DeepSeek-V3: $(cat "$TMP/err")"; fi
"$RA" convert-layout --weights "$C/deepseek_v3/model.safetensors" --n-heads 2 --to half \
    --output "$TMP/ds.safetensors" 2>"$TMP/err" # the config.json beside it says it
if [ $? -eq 1 ] && grep -q 'model_type "deepseek_v3" is latent attention' "$TMP/err" &&
    [ ! -e "$TMP/ds.safetensors" ]; then pass
else fail "convert-layout --n-heads on DeepSeek-V3, its config beside: $(cat "$TMP/err")"; fi
cp "$C/deepseek_v3/model.safetensors" "$TMP/ds_alone.safetensors"
"$RA" convert-layout --weights "$TMP/ds_alone.safetensors" --n-heads 2 --to half \
    --output "$TMP/ds.safetensors" 2>"$TMP/err" # no config: the tensors say it
if [ $? -eq 1 ] && grep -q "kv_a_proj_with_mqa.weight' in .* is latent attention's" "$TMP/err" &&
    [ ! -e "$TMP/ds.safetensors" ]; then pass
else fail "convert-layout --n-heads on DeepSeek-V3: $(cat "$TMP/err")"; fi
# A shard holding DeepSeek-V2-Lite's q_proj alone (its latent tensors in
# another shard): without --config nothing says it is not a Llama q_proj.
"$PY" - "$C/deepseek_v2_lite/model.safetensors" "$TMP/q_only.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head, data = json.loads(raw[8:8 + n]), raw[8 + n:]
name = next(k for k in head if k.endswith("self_attn.q_proj.weight"))
lo, hi = head[name]["data_offsets"]
text = json.dumps({name: dict(head[name], data_offsets=[0, hi - lo])}).encode()
text += b" " * (-len(text) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(text)) + text + data[lo:hi])
PY
"$RA" convert-layout --weights "$TMP/q_only.safetensors" --n-heads 2 --to half \
    --output "$TMP/ds.safetensors" 2>"$TMP/err"
if [ $? -eq 1 ] && grep -q "has no '.*k_proj.weight' beside it, as latent attention's" \
    "$TMP/err" && [ ! -e "$TMP/ds.safetensors" ]; then pass
else fail "convert-layout of a q_proj-only shard: $(cat "$TMP/err")"; fi

# GPT-J converted to the half layout (its first rotary_dim rows of each head
# only) gives the same Y with --layout half.
"$RA" convert-layout --weights "$C/gptj/model.safetensors" --config "$C/gptj/config.json" \
    --to half --output "$TMP/gptj_half.safetensors" 2>"$TMP/err" &&
    "$RA" attention --weights "$TMP/gptj_half.safetensors" --config "$C/gptj/config.json" \
        --input "$C/gptj/x.npy" --output "$TMP/gptj_half.npy" --layout half 2>>"$TMP/err" &&
    "$PY" "$TMP/check.py" y "$TMP/gptj_half.npy" "$C/gptj/y.npy" 1e-5 >>"$TMP/err" && pass ||
    fail "gptj converted to half: $(cat "$TMP/err")"

# convert-layout to the other layout, then attention with it: the same Y.
# Per-head norms move with their heads' rows: Cohere's [H, D] q_norm and
# StableLM 2's q_layernorm.norms.N.
# Fused projections too: each q and k head's rows inside them.
for c in cohere_qk_norm:half stablelm_qk_layernorm:interleaved phi3:interleaved \
    gpt_neox:interleaved falcon_multi_query:interleaved falcon_new_decoder:interleaved \
    falcon_per_head:interleaved internlm2:interleaved chatglm_multi_query:half \
    chatglm_per_head:half; do
    name=${c%:*} to=${c#*:}
    "$RA" convert-layout --weights "$C/$name/model.safetensors" --config "$C/$name/config.json" \
        --to "$to" --output "$TMP/$name.safetensors" 2>"$TMP/err" &&
        "$RA" attention --weights "$TMP/$name.safetensors" --config "$C/$name/config.json" \
            --input "$C/$name/x.npy" --output "$TMP/$name.npy" --layout "$to" 2>>"$TMP/err" &&
        "$PY" "$TMP/check.py" y "$TMP/$name.npy" "$C/$name/y.npy" 1e-5 >>"$TMP/err" && pass ||
        fail "$name converted to $to: $(cat "$TMP/err")"
done

# rope --config: the family's layout, either axis order.
R=$TMP/cases/rope
for family in llama cohere plain; do
    for shape in bshd bhsd; do
        if ! "$RA" rope --config "$R/$family.json" --input "$R/x_$shape.npy" --output "$R/got.npy" \
            --shape "$shape" 2>"$TMP/err"; then fail "rope $family $shape: $(cat "$TMP/err")"
        elif ! out=$("$PY" "$TMP/check.py" y "$R/got.npy" "$R/y_${family}_$shape.npy" 1e-6); then
            fail "rope $family $shape: $out"
        else pass; fi
    done
done
# M-RoPE: rope on 3-D positions, [3, B, S] and [3, S], to 1e-6 of the
# float64 transcription of transformers' chunked (Qwen2-VL) and interleaved
# (Qwen3-VL) code; freqs --hf-shape writes the cos and sin transformers puts
# together; a rope without sections refuses 3-D positions, and [3, S] with
# batch 3 is ambiguous.
for family in qwen2_vl qwen3_vl; do
    for p in pos3 pos3_shared; do
        if ! "$RA" rope --config "$R/$family.json" --input "$R/x_bshd.npy" \
            --positions "$R/$p.npy" --output "$R/got.npy" 2>"$TMP/err"; then
            fail "rope $family $p: $(cat "$TMP/err")"
        elif ! out=$("$PY" "$TMP/check.py" y "$R/got.npy" "$R/y_${family}_$p.npy" 1e-6); then
            fail "rope $family $p: $out"
        else pass; fi
    done
    rm -f "$R/cos.npy" "$R/sin.npy"
    if "$RA" freqs --config "$R/$family.json" --positions "$R/pos3_shared.npy" --hf-shape \
        --cos "$R/cos.npy" --sin "$R/sin.npy" 2>"$TMP/err" &&
        "$PY" "$TMP/check.py" y "$R/cos.npy" "$R/cos_$family.npy" 1e-6 >"$TMP/out" &&
        "$PY" "$TMP/check.py" y "$R/sin.npy" "$R/sin_$family.npy" 1e-6 >>"$TMP/out"; then pass
    else fail "freqs $family 3-D positions: $(cat "$TMP/err" "$TMP/out")"; fi
    # [4, S]: text positions (larger here, unused), then the same 3-D rows
    "$PY" -c 'import sys, numpy as np
p = np.load(sys.argv[1]); np.save(sys.argv[2], np.concatenate([p[:1] * 0 + 10 ** 6, p]))' \
        "$R/pos3_shared.npy" "$R/pos4.npy"
    rm -f "$R/cos4.npy" "$R/sin4.npy"
    if "$RA" freqs --config "$R/$family.json" --positions "$R/pos4.npy" --hf-shape \
        --cos "$R/cos4.npy" --sin "$R/sin4.npy" 2>"$TMP/err" &&
        cmp -s "$R/cos4.npy" "$R/cos.npy" && cmp -s "$R/sin4.npy" "$R/sin.npy"; then pass
    else fail "freqs $family [4, S] positions: not the [3, S] rows' tables $(cat "$TMP/err")"; fi
done
"$RA" rope --config "$R/llama.json" --input "$R/x_bshd.npy" --positions "$R/pos3.npy" \
    --output "$R/got4.npy" 2>"$TMP/err"
if [ $? -eq 1 ] && grep -q "3-D positions (temporal, height, width) need a rope with mrope_section" \
    "$TMP/err" && [ ! -e "$R/got4.npy" ]; then pass
else fail "rope: 3-D positions without sections: $(cat "$TMP/err")"; fi
"$RA" rope --config "$R/qwen2_vl.json" --input "$R/x_b3.npy" --positions "$R/pos3_shared.npy" \
    --output "$R/got4.npy" 2>"$TMP/err"
if [ $? -eq 1 ] && grep -q "with batch 3 that is 3-D positions or a row per sequence" \
    "$TMP/err" && [ ! -e "$R/got4.npy" ]; then pass
else fail "rope: [3, S] positions with batch 3: $(cat "$TMP/err")"; fi
# Without sections, [3, S] with batch 3 (and [4, S] with batch 4) is a row
# of positions per sequence: each row as its sequence's own run gives it.
for n in 3 4; do
    "$PY" - "$R" "$n" <<'PY'
import sys, numpy as np
r, n = sys.argv[1], int(sys.argv[2])
x, pos = np.load(f"{r}/x_b3.npy"), np.load(f"{r}/pos3_shared.npy")
x = np.concatenate([x, x[:1]])[:n]
pos = np.concatenate([pos, pos[:1] * 3 + 5])[:n]
np.save(f"{r}/x_rows.npy", x)
np.save(f"{r}/pos_rows.npy", pos)
for b in range(n):
    np.save(f"{r}/x_row{b}.npy", x[b:b + 1])
    np.save(f"{r}/pos_row{b}.npy", pos[b])
PY
    rm -f "$R/got5.npy"
    ok=0
    "$RA" rope --config "$R/llama.json" --input "$R/x_rows.npy" --positions "$R/pos_rows.npy" \
        --output "$R/got5.npy" 2>"$TMP/err" || ok=1
    for b in $(seq 0 $((n - 1))); do
        rm -f "$R/one.npy"
        "$RA" rope --config "$R/llama.json" --input "$R/x_row$b.npy" \
            --positions "$R/pos_row$b.npy" --output "$R/one.npy" 2>>"$TMP/err" &&
            "$PY" -c 'import sys, numpy as np
sys.exit(not np.array_equal(np.load(sys.argv[1])[int(sys.argv[3])], np.load(sys.argv[2])[0]))' \
                "$R/got5.npy" "$R/one.npy" "$b" || ok=1
    done
    if [ $ok -eq 0 ]; then pass
    else fail "rope: [$n, S] positions with batch $n and no sections differ from each row's own run: $(cat "$TMP/err")"; fi
done
# [B, H, S, D] given without --shape: axis 2 (S = 12) holds no head count.
"$RA" rope --config "$R/llama.json" --input "$R/x_bhsd.npy" --output "$R/got2.npy" 2>"$TMP/err"
if [ $? -eq 1 ] && grep -q "is it \[batch, heads, seq, head_dim\] (--shape bhsd)?" "$TMP/err" &&
    [ ! -e "$R/got2.npy" ]; then pass
else fail "rope: [B, H, S, D] without --shape: $(cat "$TMP/err")"; fi
# Without --config the layout stays interleaved (Meta's LLaMA reference code).
"$RA" rope --theta 500000 --input "$R/x_bshd.npy" --output "$R/got3.npy" &&
    "$PY" "$TMP/check.py" y "$R/got3.npy" "$R/y_cohere_bshd.npy" 1e-6 && pass ||
    fail "rope without --config: not interleaved"
# Across the ranks of an MPI launch (the CLI built with Open MPI: `mpirun -np
# P ropeattn attention`): each rank runs its zig-zag shard through ring
# attention and rank 0 writes Y, within the same 1e-5 of the float64
# reference (seen: 1.7e-7), and so with --prefill (every rank's cache a
# shard of the sequence: the engine's sharded decoding) and --grads (the
# ring's backward).  What the ring does not run (latent attention) and what
# runs in one process only fail on every rank: one
# "ropeattn:" line, the exit code, no output.  Settings as tests/test_mpi.sh.
if command -v mpirun >/dev/null 2>&1; then
    mpi_setup
    mpi_attention() { # np case [more arguments]
        local np=$1 dir=$C/$2; shift 2
        local more=()
        [ -e "$dir/positions.npy" ] && more+=(--positions "$dir/positions.npy")
        rm -f "$TMP/mpi.npy"
        "${MPIRUN[@]}" -np "$np" "$RA" attention --weights "$dir/model.safetensors" \
            --config "$dir/config.json" --input "$dir/x.npy" --output "$TMP/mpi.npy" \
            --layer "$(field "$dir" layer)" --threads 1 "${more[@]}" "$@" \
            </dev/null >/dev/null 2>"$TMP/err" # mpirun would read the loops' stdin
    }
    # (the ring on 3 ranks, the sharded caches on 2: each run takes seconds
    # under ASan)
    for c in gemma2_layer0 gpt_oss_layer0 qwen3_vl_image mistral_window olmo2 \
        llama4_chunks_layer0; do
        for np in 3 2; do
            more=()
            [ $np = 2 ] && more=(--prefill 5)
            if ! mpi_attention $np $c "${more[@]}"; then
                fail "mpirun -np $np $c ${more[*]}: $(grep -m1 ropeattn: "$TMP/err")"
            elif ! out=$("$PY" "$TMP/check.py" y "$TMP/mpi.npy" "$C/$c/y.npy" 1e-5); then
                fail "mpirun -np $np $c ${more[*]}: $out"
            else pass; fi
        done
    done
    # --prefill into 8-bit caches: the prompt attends over its float32 keys
    # on every rank as in one process, so Y is one process's within 1e-5
    # (not within the cache's bounds)
    for c in gpt_oss_layer0 mistral_window; do
        dir=$C/$c
        pos=()
        [ -e "$dir/positions.npy" ] && pos=(--positions "$dir/positions.npy")
        for dt in int8 fp8; do
            if ! "$RA" attention --weights "$dir/model.safetensors" --config "$dir/config.json" \
                --input "$dir/x.npy" --output "$TMP/one.npy" --layer "$(field "$dir" layer)" \
                "${pos[@]}" --prefill 5 --cache-dtype $dt 2>"$TMP/err"; then
                fail "$c --prefill 5 --cache-dtype $dt: $(cat "$TMP/err")"
            elif ! mpi_attention 3 $c --prefill 5 --cache-dtype $dt; then
                fail "mpirun -np 3 $c --cache-dtype $dt: $(grep -m1 ropeattn: "$TMP/err")"
            elif ! out=$("$PY" "$TMP/check.py" y "$TMP/mpi.npy" "$TMP/one.npy" 1e-5); then
                fail "mpirun -np 3 $c --prefill 5 --cache-dtype $dt against one process: $out"
            else pass; fi
        done
    done
    # --grads: dL/dX and every weight's gradient (each rank's share, summed
    # on rank 0) within 1e-5 of the one-process G written above (seen:
    # 5e-7), and the masks' float64 differences as there.
    cat >"$TMP/same_grads.py" <<'PY'
import sys
import numpy as np
from st_read import read_f32
a, b = read_f32(sys.argv[1]), read_f32(sys.argv[2])
ok = sorted(a) == sorted(b) and all(
    np.max(np.abs(a[k] - b[k])) <= 1e-5 * np.max(np.abs(b[k])) for k in b)
sys.exit(0 if ok else 1)
PY
    for c in gpt_oss_layer0 llama4_chunks_layer0 qwen3_vl_image; do
        rm -f "$TMP/g.safetensors"
        if ! mpi_attention 3 $c --grad-output "$C/$c/dy.npy" --grads "$TMP/g.safetensors"; then
            fail "mpirun $c --grads: $(grep -m1 ropeattn: "$TMP/err")"
        elif ! "$PY" "$TMP/same_grads.py" "$TMP/g.safetensors" "$C/$c/g.safetensors" ||
            ! "$PY" "$TMP/masked_grads.py" "$TMP/g.safetensors" "$C/$c"; then
            fail "mpirun $c --grads: differs from one process's"
        else pass; fi
    done
    while IFS='|' read -r c np code message more; do
        read -r -a more <<<"$more"
        mpi_attention "$np" "$c" "${more[@]}"
        got=$?
        if [ $got -ne "$code" ]; then fail "mpirun $c ${more[*]}: exit code $got, expected $code"
        elif [ "$(grep -c '^ropeattn:' "$TMP/err")" -ne 1 ]; then
            fail "mpirun $c ${more[*]}: not one message line: $(cat "$TMP/err")"
        elif ! grep -q "^ropeattn: .*$message" "$TMP/err"; then
            fail "mpirun $c ${more[*]}: expected /$message/: $(grep ropeattn: "$TMP/err")"
        elif [ -e "$TMP/mpi.npy" ]; then fail "mpirun $c ${more[*]}: an output was written"
        else pass; fi
    done <<'CASES'
deepseek_v3|3|1|latent attention (MLA)|
gemma2_layer0|2|2|--path reference runs in one process|--path reference
gemma2_layer0|13|1|seq 12 over 13 ranks|
CASES
fi
summary
