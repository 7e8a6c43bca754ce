#!/usr/bin/env bash
# test_hf.sh — the command line on checkpoints made by Hugging Face
# transformers itself, against the outputs of its own modeling code.
#
# Each folder tests/hf/<case>/ holds what tests/hf/make_hf_cases.py wrote
# with transformers 5.23.0 and torch 2.15.0 (tests/hf/requirements.txt;
# `make hf-fixtures` remakes them; each case.json names its versions): a tiny
# model saved by save_pretrained (config.json in that version's form,
# model.safetensors in F32, F16 or BF16), layer L's attention input X and
# output Y, Y again as the model generated it through transformers'
# DynamicCache (a prefill of P tokens, then one token a step: y_cache.npy),
# the position_ids, the rotary cos/sin it used, DY and torch autograd's dL/dX
# and dL/dW for L = sum(Y * DY).  Every rope type on Llama (default, linear,
# dynamic below and above its length, yarn with and without mscale, llama3,
# longrope short and long), then one case per family of the README's table
# that transformers has a class for: windows (Mistral, Ministral, Qwen2,
# Gemma 2 and 3, OLMo 3, gpt-oss), soft-capping, sinks, Llama 4's chunks,
# M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, Qwen3-VL-MoE), latent attention
# (DeepSeek-V2-Lite, V3, Kimi K2), fused and packed projections (Phi-3,
# GPT-NeoX, Falcon), the norms, biases, multipliers and clips of the rest
# (StableLM's LayerNorm per head); and the multimodal models saved whole
# with a tiny vision tower (Gemma 3, Mistral 3, Llama 4, Qwen2-VL,
# Qwen2.5-VL, Qwen3-VL, Qwen3-VL-MoE: the text layer under its text_config
# and its language_model or model.layers names).
#
# Every case: Y and the gradients; `--prefill P` against transformers'
# cached Y (the encoders, ModernBERT, ESM-2 and RoFormer, whose layers have no
# causal mask: `--prefill` refused).  The rest (Y without --grads; f16, bf16, int8 and fp8 caches;
# `freqs`, `freqs --hf-shape`, convert-layout) runs on every case in the
# plain build, and on seven Llama, StableLM, Qwen2 and Qwen3 cases alone
# (ALWAYS_FULL) under an ASan build, on three of them (VALGRIND_FULL) under
# valgrind (RA_CLI_WRAPPER), whose runs cost ~5 and ~30 times more;
# RA_HF_FULL=1 or 0 overrides.
# Every comparison is queued and made by one Python run at the end.
#
# Tolerances, relative to max|ref| (HF itself computes in float32; its
# attention module's float32 against float64 differs by up to 1e-6 on these
# cases (case.json "f32_vs_f64"), its cached generation against its Y by up
# to 4e-6 ("cache_vs_y")):
#   Y, the decode path with an f32 cache, dL/dX and dL/dW   1e-5
#   Y with an f16 / bf16 cache                              5e-3 / 3e-2
#   cos and sin (absolute)                                  2e-6
#
# Prints "hf: N passed, N failed" last; exits 1 if anything failed.
SUITE=hf
source "$(dirname "$0")/shell_common.sh"
require_ropeattn_and_numpy

cat >"$TMP/check.py" <<'PY'
"""Comparisons for test_hf.sh (numpy only).
  check.py fields DIR...  one line per case: name layer prefill freqs mla
                          table family half seq_len multimodal causal
  check.py batch FILE     FILE's lines "label<TAB>cmd<TAB>arg..." (cmd y,
                          table, full_table, grads): "FAIL: label: why" for
                          each failed one, then "checks: PASSED FAILED"."""
import json, os, sys
import numpy as np

from st_read import read_f32 as read_safetensors

def rel(got, want):
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return np.inf
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))

def fields(dirs):
    for d in dirs:
        c = json.load(open(os.path.join(d, "case.json")))
        pos = np.load(os.path.join(d, "pos.npy"))
        config = json.load(open(os.path.join(d, "config.json")))
        top = config.get("thinker_config", config)  # (Qwen-Omni's)
        multimodal = any(k in top for k in ("vision_config", "audio_config", "vq_config",
                                            "protein_encoder_config"))  # (Voxtral Realtime's ...)
        print(os.path.basename(os.path.normpath(d)), c["layer"], c.get("prefill") or 0, c.get("freqs", True),
              c.get("mla", False), c.get("table") or "half", c.get("family", "llama"),
              max(1, pos.shape[-1] // 2), int(pos.max()) + 1, multimodal, c.get("causal", True))

def error(cmd, args):
    """cmd's distance and tolerance."""
    tol = float(args[2])
    if cmd == "y":
        return rel(np.load(args[0]), np.load(args[1])), tol
    if cmd == "table":  # ours [B, S, R/2] (or flat) against HF's [B, S, R]
        got, want = np.load(args[0]), np.load(args[1])
        # Llama's [c, c]: the first half; Cohere's c repeated: every other
        half = (want[..., ::2] if args[3] == "interleaved"
                else want[..., : want.shape[-1] // 2]).reshape(-1)
        got = got.reshape(-1)
        return (float(np.max(np.abs(got - half))) if got.shape == half.shape else np.inf), tol
    if cmd == "full_table":  # ours [n, R] against HF's [B, S, R]
        got, want = np.load(args[0]), np.load(args[1])
        want = want.reshape(-1, want.shape[-1])
        return (float(np.max(np.abs(got - want))) if got.shape == want.shape else np.inf), tol
    if cmd == "grads":
        got, want = read_safetensors(args[0]), dict(np.load(args[1]))
        if sorted(got) != sorted(want):
            raise ValueError(f"tensors {sorted(got)}, expected {sorted(want)}")
        return max(rel(got[k], want[k]) for k in want), tol
    raise ValueError(f"unknown check {cmd}")

def batch(path):
    passed = failed = 0
    for line in open(path):
        label, cmd, *args = line.rstrip("\n").split("\t")
        try:
            e, tol = error(cmd, args)
            why = None if e <= tol else f"{cmd} {e:.3g} > {tol:g}"
        except Exception as ex:
            why = f"{cmd}: {ex}"
        if why:
            print(f"FAIL: {label}: {why}")
            failed += 1
        else:
            passed += 1
    print(f"checks: {passed} {failed}")

if sys.argv[1] == "fields":
    fields(sys.argv[2:])
else:
    batch(sys.argv[2])
PY
CHECKS=$TMP/checks
: >"$CHECKS"
n_out=0
# queue LABEL CMD ARGS...: a comparison for the Python run at the end
queue() { local IFS=$'\t'; echo "$*" >>"$CHECKS"; }
# out [EXT]: sets o to a fresh output path (kept for the comparisons at the end)
out() { n_out=$((n_out + 1)); o=$TMP/o$n_out.${1:-npy}; }

# Full checks everywhere, or only for ALWAYS_FULL under ASan and
# VALGRIND_FULL under valgrind (the other ALWAYS_FULL cases light there).
# The light checks run on every eighth other case alone under valgrind and
# every second under ASan (RA_HF_SAMPLE=N: every Nth; 1: all): each of their
# runs costs ~30 and ~5 times a plain one (under valgrind ~2 CPU s, mostly
# translating the code it runs: a run's cost hardly depends on its case),
# the cases share their code paths in threes and more, and test_families.sh
# reads every family's names and keys under ASan too.
# The rope types' cases (linear, yarn, longrope) are light there: their
# tables' code runs in every light check, and each full check reads them the
# same way as llama_default's.  What the full checks add (each cache dtype,
# freqs, convert-layout) is code the family does not change: under valgrind
# it runs on f32, f16 and bf16 weights.
ALWAYS_FULL=" llama_default llama_f16 llama_dynamic_long llama3_bf16 stablelm_partial 
 qwen2_bias qwen3_qknorm "
VALGRIND_FULL=" llama_default llama_f16 llama3_bf16 "
full_all=1 sample=1 full_cases=$ALWAYS_FULL
if [ -n "${RA_CLI_WRAPPER:-}" ]; then full_all=0 sample=8 full_cases=$VALGRIND_FULL
elif asan_build; then full_all=0 sample=2
fi
full_all=${RA_HF_FULL:-$full_all} sample=${RA_HF_SAMPLE:-$sample}
# Families whose q_proj and k_proj rows are interleaved already (their
# convert-layout is refused), whose cos and sin --hf-shape does not write
# (interleaved but for DeepSeek-V3's rope_interleave; GPT-OSS's, the half
# table that plain freqs writes), and OLMo 2 and 3, whose
# q/k norms over the whole projection convert-layout does not permute.
INTERLEAVED=" cohere cohere2 glm glm4 llama4 llama4_text gptj codegen helium ernie4_5 roformer glm4v 
 glm4v_text glm_ocr_text openai_privacy_filter pe_audio_encoder pe_video_encoder pe_audio_video_encoder "
NO_HF_SHAPE=" cohere cohere2 glm glm4 kimi_k2 helium ernie4_5 deepseek_v32 glm_moe_dsa bailing_hybrid axk2 
 gpt_oss glm4v_text glm_ocr_text openai_privacy_filter pe_audio_encoder pe_video_encoder 
 pe_audio_video_encoder "
WHOLE_NORM=" olmo2 olmo3 olmoe minimax_m2 esmc "
HEAD_PER_LAYER=" gemma4_text gemma4_unified_text " # convert-layout takes one layer at a time (--layer)
VALUES_FROM_KEYS=" gemma4_text_full gemma4_text_full_factor gemma4_unified_text_full " # cases: k_proj's rows are v's
# (a sparse-attention indexer's q, k and norms beside the layer's: not converted)
INDEXED=" qwen4_exp_text minimax_m3_vl_text "
# key/value heads that differ by layer (MiMo-V2-Flash's sliding layers have
# twice the config's): convert-layout checks k_proj's rows against the
# config's count, and refuses
KV_BY_LAYER=" mimo_v2_flash "
ROTARY_PER_TYPE=" laguna "  # its layer types rotate different parts of each head

# attention LABEL DIR REF TOL -- ARGS...: runs the layer of DIR, queues
# the comparison of its output with DIR/REF
attention() {
    local label=$1 dir=$2 ref=$3 tol=$4 y; shift 5
    out; y=$o
    if "$RA" attention --weights "$dir/model.safetensors" --config "$dir/config.json" \
        --layer "$layer" --input "$dir/x.npy" --positions "$dir/pos.npy" \
        --output "$y" "$@" 2>"$TMP/err"; then
        queue "$label" y "$y" "$dir/$ref" "$tol"
    else fail "$label: $(cat "$TMP/err")"
    fi
}

# refused LABEL MESSAGE CMD...: CMD fails with exit 1 and MESSAGE on stderr
refused() {
    local label=$1 message=$2; shift 2
    "$@" 2>"$TMP/err"
    if [ $? -eq 1 ] && grep -qF -- "$message" "$TMP/err"; then pass
    else fail "$label: not refused with \"$message\": $(cat "$TMP/err")"; fi
}

# The f16 to fp8 caches against Y.  8-bit caches: seen up to 0.017 (int8)
# and 0.079 (fp8) of max|y| on these cases (bf16: 0.0064); bounds about
# twice that (README, "Tolerances")
cache_dtypes() {
    attention "$c: y, prefill $p then decode, f16 cache" "$dir" y.npy 5e-3 -- \
        --prefill "$p" --cache-dtype f16
    attention "$c: y, prefill 1 then decode, bf16 cache" "$dir" y.npy 3e-2 -- \
        --prefill 1 --cache-dtype bf16
    attention "$c: y, prefill $p then decode, int8 cache" "$dir" y.npy 3e-2 -- \
        --prefill "$p" --cache-dtype int8
    attention "$c: y, prefill 1 then decode, fp8 cache" "$dir" y.npy 1.5e-1 -- \
        --prefill 1 --cache-dtype fp8 --cache-scale 0.25
}

# freqs: the config's global rope, where the layer rotates by it
# (case.json's "freqs"), as ropeattn's half table and as --hf-shape's
# whole [n, rotary_dim] one
freqs() {
    [ "$has_freqs" = True ] || return 0
    local cos sin; out; cos=$o; out; sin=$o
    if "$RA" freqs --config "$dir/config.json" --positions "$dir/pos.npy" \
        --cos "$cos" --sin "$sin" 2>"$TMP/err"; then
        queue "$c: freqs cos" table "$cos" "$dir/cos.npy" 2e-6 "$table"
        queue "$c: freqs sin" table "$sin" "$dir/sin.npy" 2e-6 "$table"
    else fail "$c: freqs: $(cat "$TMP/err")"
    fi
    out; cos=$o; out; sin=$o
    local hf=("$RA" freqs --config "$dir/config.json" --positions "$dir/pos.npy" --hf-shape
              --cos "$cos" --sin "$sin")
    if [[ $NO_HF_SHAPE == *" $family "* ]]; then
        refused "$c: freqs --hf-shape" "arranges its cos and sin otherwise" "${hf[@]}"
    elif "${hf[@]}" 2>"$TMP/err"; then
        queue "$c: freqs --hf-shape cos" full_table "$cos" "$dir/cos.npy" 2e-6
        queue "$c: freqs --hf-shape sin" full_table "$sin" "$dir/sin.npy" 2e-6
    else fail "$c: freqs --hf-shape: $(cat "$TMP/err")"
    fi
}

# convert-layout to interleaved (q/k rows, biases and norms per head), then
# the same Y with --layout interleaved; refused for latent attention (its
# rope rows not converted), families interleaved already, whole-projection
# norms, a sparse-attention indexer's tensors, and a multimodal checkpoint whose vision tower's attention
# (Q/K rows of another size, fused qkv; Phi-4-multimodal's vision and audio
# parts under embed_tokens_extend; Qwen-Omni's audio tower) it takes for a
# text layer's (one whose tower has no such tensors converts: LFM3-VL's)
convert_layout() {
    local inter=$TMP/inter.safetensors
    rm -f "$inter"
    local cmd=("$RA" convert-layout --weights "$dir/model.safetensors" --output "$inter"
               --config "$dir/config.json")
    if [[ $HEAD_PER_LAYER == *" $family "* ]]; then
        refused "$c: convert-layout of layers of two head sizes" "convert one layer at a time" \
            "${cmd[@]}" --to interleaved
        cmd+=(--layer "$layer")
    fi
    if [ "$mla" = True ]; then
        refused "$c: convert-layout on latent attention" "is latent attention" "${cmd[@]}" --to half
    elif [[ $VALUES_FROM_KEYS == *" $c "* ]]; then
        refused "$c: convert-layout" "takes its values from k_proj" "${cmd[@]}" --to interleaved
    elif [[ $INTERLEAVED == *" $family "* ]]; then
        refused "$c: convert-layout" "stores q_proj and k_proj rows interleaved already" \
            "${cmd[@]}" --to interleaved
    elif [[ $WHOLE_NORM == *" $family "* ]]; then
        refused "$c: convert-layout" "is not a norm of each head" "${cmd[@]}" --to interleaved
    elif [[ $INDEXED == *" $family "* ]]; then
        refused "$c: convert-layout" "is a sparse-attention indexer's" "${cmd[@]}" --to interleaved
    elif [[ $KV_BY_LAYER == *" $family "* ]]; then
        refused "$c: convert-layout" "key/value heads" "${cmd[@]}" --to interleaved
    elif [[ $ROTARY_PER_TYPE == *" $family "* ]]; then
        refused "$c: convert-layout" "(a rope per layer type): not converted" "${cmd[@]}" \
            --to interleaved
    elif "${cmd[@]}" --to interleaved 2>"$TMP/err"; then
        local y; out; y=$o
        if "$RA" attention --weights "$inter" --config "$dir/config.json" --layer "$layer" \
            --input "$dir/x.npy" --positions "$dir/pos.npy" --output "$y" \
            --layout interleaved 2>"$TMP/err"; then
            queue "$c: y after convert-layout --to interleaved" y "$y" "$dir/y.npy" 1e-5
        else fail "$c: y after convert-layout --to interleaved: $(cat "$TMP/err")"
        fi
    elif [ $? -eq 1 ] && [ "$multimodal" = True ] && grep -Eq "^ropeattn: tensor \
'(thinker\.)?(model\.)?(vision_tower|visual|vision_model|audio_tower|embed_tokens_extend|\
multi_modal_projector|vqmodel|protein_encoder)\." \
        "$TMP/err"; then pass
    else fail "$c: convert-layout: $(cat "$TMP/err")"
    fi
    [ ! -e "$inter" ] || [ "$mla" != True ] || fail "$c: convert-layout wrote on a refusal"
}

cases=0
"$PY" "$TMP/check.py" fields tests/hf/*/ >"$TMP/fields" || fail "case.json of tests/hf"
while read -r c layer prefill has_freqs mla table family p seq_len multimodal causal; do
    dir=tests/hf/$c
    cases=$((cases + 1))
    case_chosen "$c" || continue # (counted: the sample is the same as in the whole run)
    full=$full_all
    [[ $full_cases == *" $c "* ]] && full=1
    [ "$full" = 1 ] || [[ $ALWAYS_FULL == *" $c "* ]] || [ $((cases % sample)) = 0 ] || continue
    # (light: Y from the --grads run alone)
    [ "$full" = 1 ] || [ ! -f "$dir/grads.npz" ] && attention "$c: y" "$dir" y.npy 1e-5 --
    if [ "$causal" = False ]; then
        # an encoder's layer (case.json "causal" false) has no cache
        refused "$c: --prefill on a layer without the causal mask" \
            "--prefill: this layer has no causal mask" \
            "$RA" attention --weights "$dir/model.safetensors" --config "$dir/config.json" \
            --layer "$layer" --input "$dir/x.npy" --positions "$dir/pos.npy" \
            --output "$TMP/refused.npy" --prefill "$p"
    elif [ "$prefill" -gt 0 ]; then
        attention "$c: transformers' DynamicCache generation, prefill $prefill" "$dir" \
            y_cache.npy 1e-5 -- --prefill "$prefill"
    else
        # past max_position_embeddings each step's length gives the dynamic
        # rope other frequencies than the whole input's: transformers' cached
        # generation is not this y, and --prefill is refused
        refused "$c: --prefill with a dynamic rope past its length" \
            "prefill with rope type dynamic: the step of tokens 0.. sees" \
            "$RA" attention --weights "$dir/model.safetensors" --config "$dir/config.json" \
            --layer "$layer" --input "$dir/x.npy" --positions "$dir/pos.npy" \
            --output "$TMP/refused.npy" --prefill "$p"
        # --seq-len fixes the length for every step: the no-cache y, as asked
        attention "$c: y, prefill $p then decode, --seq-len" "$dir" y.npy 1e-5 -- \
            --prefill "$p" --seq-len "$seq_len"
    fi
    if [ -f "$dir/grads.npz" ]; then
        out safetensors; g=$o
        attention "$c: y with --grads" "$dir" y.npy 1e-5 -- \
            --grad-output "$dir/dy.npy" --grads "$g"
        [ -f "$g" ] && queue "$c: gradients" grads "$g" "$dir/grads.npz" 1e-5
    fi
    [ "$full" = 1 ] || continue
    [ "$prefill" -gt 0 ] && cache_dtypes
    freqs
    convert_layout
done <"$TMP/fields"
[ "$cases" -ge 60 ] || fail "only $cases cases under tests/hf"

# CodeGen's qkv_proj (q, v and k per model-parallel group) converted --to half
# (--to interleaved is refused above: INTERLEAVED): its q and k heads' rows
# move where the groups hold them, and the converted layer runs as transformers'
D=tests/hf/codegen_qvk_groups
if case_chosen codegen_qvk_groups && [ "$full_all" = 1 ]; then
    out safetensors; half=$o; out; y=$o
    if "$RA" convert-layout --weights "$D/model.safetensors" --config "$D/config.json" \
        --output "$half" --to half 2>"$TMP/err" &&
        "$RA" attention --weights "$half" --config "$D/config.json" --input "$D/x.npy" \
            --positions "$D/pos.npy" --output "$y" --layout half 2>>"$TMP/err"; then
        queue "codegen_qvk_groups: y after convert-layout --to half" y "$y" "$D/y.npy" 1e-5
    else fail "codegen_qvk_groups: convert-layout --to half: $(cat "$TMP/err")"
    fi
fi

# A multimodal Gemma 3 config whose text_config leaves the head counts and
# head_dim to Gemma3TextConfig's defaults (8, 4, 256: gemma-3-4b's): read as
# transformers reads it, which these weights (4 heads of 8) do not fit
D=tests/hf/gemma3_multimodal
"$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))
for k in ("num_attention_heads", "num_key_value_heads", "head_dim"): del c["text_config"][k]
json.dump(c, open(sys.argv[2], "w"))' "$D/config.json" "$TMP/gemma3_defaults.json"
refused "gemma3 text_config without head counts: Gemma3TextConfig's defaults" \
    "expected [2048, 32] (dim 32, n_heads 8, n_kv_heads 4, head_dim 256)" \
    "$RA" attention --weights "$D/model.safetensors" --config "$TMP/gemma3_defaults.json" \
    --layer 0 --input "$D/x.npy" --positions "$D/pos.npy" --output "$TMP/refused.npy"

# A config without num_attention_heads (Llama's config class has no default
# for it: transformers fails building it): the message names the key the
# config lacks, not --n-heads as if no config were given
D=tests/hf/llama_default
"$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))
del c["num_attention_heads"]
json.dump(c, open(sys.argv[2], "w"))' "$D/config.json" "$TMP/no_heads.json"
refused "llama config without num_attention_heads" \
    "$TMP/no_heads.json has no \"num_attention_heads\"" \
    "$RA" attention --weights "$D/model.safetensors" --config "$TMP/no_heads.json" \
    --input "$D/x.npy" --positions "$D/pos.npy" --output "$TMP/refused.npy"

# DBRX: attn_config's rope_theta, read by transformers 4 and ignored by 5
# (whose rope is the top level's), where they differ; a num_key_value_heads
# that contradicts attn_config.kv_n_heads (DbrxConfig takes the latter)
D=tests/hf/dbrx_clip
for edit in 'c["attn_config"]["rope_theta"] = 10000.0' 'c["num_key_value_heads"] = 4'; do
    "$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"))' "$D/config.json" "$TMP/dbrx.json" "$edit"
    case $edit in
    *rope_theta*) why='"attn_config.rope_theta" is 10000 and the rope'"'"'s rope_theta 500000' ;;
    *) why='"num_key_value_heads" is 4 and "attn_config.kv_n_heads" 2' ;;
    esac
    refused "dbrx: $edit" "$why" \
        "$RA" attention --weights "$D/model.safetensors" --config "$TMP/dbrx.json" \
        --input "$D/x.npy" --positions "$D/pos.npy" --output "$TMP/refused.npy"
done

# --no-causal: a decoder's layer without the causal mask, where its family
# has no window (a sliding window is defined over earlier tokens only:
# refused), and never through a cache
D=tests/hf/gemma2_softcap_window
NC=(attention --weights "$D/model.safetensors" --config "$D/config.json" --layer 0
    --input "$D/x.npy" --positions "$D/pos.npy" --output "$TMP/refused.npy" --no-causal)
refused "--no-causal on a sliding layer" \
    "non_causal (--no-causal) on a layer with a sliding window of 4 tokens" "$RA" "${NC[@]}"
"$RA" "${NC[@]}" --prefill 2 2>"$TMP/err"
if [ $? -eq 2 ] && grep -qF -- "--no-causal is not run with --prefill" "$TMP/err"; then pass
else fail "--no-causal --prefill: not refused: $(cat "$TMP/err")"; fi

# longrope through a cache: a prompt at or below original_max_position_embeddings
# (16) and steps past it would rotate with short and then long factors in
# transformers: refused.  Every step past it: the no-cache Y.
D=tests/hf/llama_longrope_short
LR=(attention --weights "$D/model.safetensors" --config "$D/config.json" --input "$D/x.npy")
refused "longrope --prefill across original_max_position_embeddings" \
    "prefill with rope type longrope: the step of tokens 0.. sees length 14" \
    "$RA" "${LR[@]}" --start-pos 10 --prefill 4 --output "$TMP/y.npy"
if "$RA" "${LR[@]}" --start-pos 20 --output "$TMP/y.npy" 2>"$TMP/err" &&
    "$RA" "${LR[@]}" --start-pos 20 --prefill 4 --output "$TMP/y_cached.npy" 2>>"$TMP/err"; then
    queue "longrope --prefill past original_max_position_embeddings" y "$TMP/y_cached.npy" \
        "$TMP/y.npy" 1e-5
else fail "longrope --prefill past original_max_position_embeddings: $(cat "$TMP/err")"; fi

# RoFormer's saved sinusoidal table (roformer.encoder.embed_positions.weight,
# [max_position_embeddings, head_dim]): the formula's, nudged by one float32
# ulp, or absent (transformers computes it): Y; an entry moved by 1e-4 (past
# the tolerance, one float32 ulp at 1): refused by name
D=tests/hf/roformer
"$PY" - "$D/model.safetensors" "$TMP/rof" <<'PY'
import os, sys
import numpy as np
sys.path.insert(0, "tests/families")
sys.path.insert(0, "tests")
import make_family_cases as fc
from st_read import read_f32
t, out = read_f32(sys.argv[1]), sys.argv[2]
os.makedirs(out, exist_ok=True)
name = "roformer.encoder.embed_positions.weight"
table = t[name].copy()
fc.write_safetensors(os.path.join(out, "absent.safetensors"),
                     {k: v for k, v in t.items() if k != name})
ulp = table.copy()
ulp[5, 1] = np.nextafter(ulp[5, 1], np.float32(2))
fc.write_safetensors(os.path.join(out, "ulp.safetensors"), dict(t, **{name: ulp}))
moved = table.copy()
moved[7, 6] += np.float32(1e-4)
fc.write_safetensors(os.path.join(out, "moved.safetensors"), dict(t, **{name: moved}))
PY
for w in absent ulp; do
    out; y=$o
    if "$RA" attention --weights "$TMP/rof/$w.safetensors" --config "$D/config.json" \
        --layer 1 --input "$D/x.npy" --positions "$D/pos.npy" --output "$y" \
        2>"$TMP/err"; then
        queue "roformer: the sinusoidal table $w" y "$y" "$D/y.npy" 1e-5
    else fail "roformer: the sinusoidal table $w: $(cat "$TMP/err")"; fi
done
refused "roformer: a sinusoidal table not the formula's" \
    "roformer.encoder.embed_positions.weight[7, 6] is" \
    "$RA" attention --weights "$TMP/rof/moved.safetensors" --config "$D/config.json" \
    --layer 1 --input "$D/x.npy" --positions "$D/pos.npy" --output "$TMP/refused.npy"

# ModernBERT's unpadded batches as packed documents (tests/hf/unpadded_cases.py):
# the real tokens of transformers' right-padded batch (rows of 5 and 7 of 7)
# packed into one row, positions restarting: --packed gives the layer's
# outputs there, for the global layer 0 and the local layer 1 (a window of 3
# each way that must stop at a document's end); 1e-4 of max|y| (seen 3.4e-7)
D=tests/hf_unpadded/modernbert
for L in 0 1; do
    out; y=$o
    if "$RA" attention --weights "$D/model.safetensors" --config "$D/config.json" --layer $L \
        --input "$D/x$L.npy" --positions "$D/pos.npy" --packed --output "$y" 2>"$TMP/err"; then
        queue "modernbert unpadded as packed documents, layer $L" y "$y" "$D/y$L.npy" 1e-4
    else fail "modernbert unpadded as packed documents, layer $L: $(cat "$TMP/err")"; fi
done

# Keys the config classes save but a hand-written config may leave out, read
# as the class would fill them in: MiniMax-M2's rotary_dim without
# partial_rotary_factor (rotary_dim / head_dim); Dots1 without layer_types
# (the layers from max_window_layers on slide); Mellum without
# rope_parameters (MellumConfig's rope per layer type); Gemma 4 as its
# published configs write it, global_head_dim and num_global_key_value_heads
# for per_layer_config, and without rope_parameters (Gemma4TextConfig's);
# MiMo-V2-Flash's sliding_window_size (sliding_window is it + 1, whatever
# else is given); ModernBERT without layer_types (global_attn_every_n_layers,
# default 3, says which layers are global) and without rope_parameters
# (global_rope_theta and local_rope_theta's defaults; local_attention 7: the
# same window, 7 // 2 = 3)
edited() { # edited CASE OUT PYTHON: CASE's config.json, edited by PYTHON (on c), into OUT
    "$PY" -c 'import json, sys
c = json.load(open(sys.argv[1]))
exec(sys.argv[3])
json.dump(c, open(sys.argv[2], "w"))' "tests/hf/$1/config.json" "$2" "$3"
}
for spec in "minimax_m2_rotary_dim|0|del c['rope_parameters']['partial_rotary_factor']" \
    "dots1_window|1|del c['layer_types']; c['max_window_layers'] = 1" \
    "mellum_sliding|0|del c['rope_parameters']" \
    "nanochat_bias|1|c['use_qk_norm'] = False" \
    "gemma4_text_full|1|del c['per_layer_config'], c['rope_parameters']; c['global_head_dim'] = 16; c['num_global_key_value_heads'] = 1" \
    "mimo_v2_flash_sliding|1|c['sliding_window'] = 129; c['sliding_window_size'] = 3" \
    "modernbert_global|0|del c['layer_types']" \
    "modernbert_local|1|del c['layer_types']; c['global_attn_every_n_layers'] = 2" \
    "modernbert_local_default_rope|2|del c['rope_parameters']; c['local_attention'] = 7"; do
    IFS='|' read -r c layer code <<<"$spec"
    D=tests/hf/$c
    edited "$c" "$TMP/edited.json" "$code"
    out; y=$o
    if "$RA" attention --weights "$D/model.safetensors" --config "$TMP/edited.json" \
        --layer "$layer" --input "$D/x.npy" --positions "$D/pos.npy" --output "$y" \
        2>"$TMP/err"; then
        queue "$c: y, config edited: $code" y "$y" "$D/y.npy" 1e-5
    else fail "$c: config edited: $code: $(cat "$TMP/err")"
    fi
done

"$PY" "$TMP/check.py" batch "$CHECKS" >"$TMP/results"
grep '^FAIL' "$TMP/results"
read -r _ ok bad < <(grep '^checks:' "$TMP/results") || { fail "the comparisons did not run"; ok=0 bad=0; }
passed=$((passed + ok)) failed=$((failed + bad))
summary
