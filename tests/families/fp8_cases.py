"""Block-FP8 checkpoints (DeepSeek-V3's release, Qwen3-*-FP8) for
make_family_cases.py: each projection quantized here as transformers'
FineGrainedQuantize does (per [bo, bi] block, scale = amax / 448 stored as
weight_scale_inv in F32, codes the nearest e4m3 values; NaN codes never),
then dequantized as its FineGrainedDequantize does, independently of
ropeattn: the e4m3 value decoded from the code's bits, times its block's
scale in float32, rounded to the config's torch_dtype (bfloat16: the
nearest of the two neighbours by distance, ties to even; float16: numpy's
cast).  The reference is the float64 layer on those weights.  Cases: latent
attention (DeepSeek-V3's names, blocks [5, 3] with partial edges), Qwen3
(q/k norms unquantized, modules_to_not_convert, [128, 128] blocks larger
than the matrices), Llama into float16 ([3, 5]); and refusals.
"""
import numpy as np

import mla_cases
from make_family_cases import B, S, attention, f32, inv_freq, named, save

RNG = np.random.default_rng(20261203)
CODES = np.arange(256)
EXP, MAN = (CODES >> 3) & 15, CODES & 7
VALUES = np.where(EXP == 0, MAN * 2.0 ** -9, (1 + MAN / 8) * 2.0 ** (EXP - 7))
VALUES = np.where(CODES & 0x80, -VALUES, VALUES)  # e4m3fn; 0x7f, 0xff (NaN) never drawn
FINITE = np.array([c for c in CODES if c & 0x7f != 0x7f], dtype=np.uint8)


def round_bf16(a):
    """float32 a to the nearer bfloat16 neighbour (ties: even), as float32."""
    u = np.asarray(a, np.float32).view(np.uint32)
    lo = u & np.uint32(0xffff0000)
    hi = lo + np.uint32(0x10000)
    flo, fhi = lo.view(np.float32).astype(np.float64), hi.view(np.float32).astype(np.float64)
    x = np.asarray(a, np.float64)
    dlo, dhi = np.abs(x - flo), np.abs(x - fhi)
    take_lo = (dlo < dhi) | ((dlo == dhi) & ((lo >> 16) & 1 == 0))
    return np.where(take_lo, lo, hi).view(np.float32)


def quantize(w, block):
    """w [out, in] -> (codes uint8, scales float32 [ceil(out/bo), ceil(in/bi)])."""
    bo, bi = block
    rows, cols = w.shape
    scales = np.zeros((-(-rows // bo), -(-cols // bi)), np.float32)
    codes = np.zeros(w.shape, np.uint8)
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            part = w[i * bo:(i + 1) * bo, j * bi:(j + 1) * bi]
            scales[i, j] = np.float32(np.abs(part).max() / 448.0)
            target = part / np.float64(scales[i, j])
            near = np.abs(target[..., None] - VALUES[FINITE]).argmin(-1)
            codes[i * bo:(i + 1) * bo, j * bi:(j + 1) * bi] = FINITE[near]
    return codes, scales


def dequantize(codes, scales, block, dtype):
    """transformers' dequantize: float32(value) * float32(scale), then dtype; float64 out."""
    bo, bi = block
    grid = np.repeat(np.repeat(scales, bo, 0), bi, 1)[:codes.shape[0], :codes.shape[1]]
    product = VALUES[codes].astype(np.float32) * grid.astype(np.float32)  # float32 multiply
    if dtype == "bfloat16":
        product = round_bf16(product)
    elif dtype == "float16":
        product = product.astype(np.float16).astype(np.float32)
    return product.astype(np.float64)


def quantized(w, roles, names, block, dtype):
    """tensors {name: codes, name_scale_inv: scales} for roles, others as
    they are; and w with those roles' weights dequantized."""
    tensors, deq = {}, dict(w)
    for role, a in w.items():
        name = names[role]
        if role in roles:
            codes, scales = quantize(a, block)
            tensors[name] = codes
            tensors[name + "_scale_inv"] = scales
            deq[role] = dequantize(codes, scales, block, dtype)
        else:
            tensors[name] = a
    return tensors, deq


def qconfig(block, **extra):
    return dict({"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                 "weight_block_size": list(block)}, **extra)


def fp8_cases(out):
    # DeepSeek-V3's FP8 release: every projection in blocks (here [5, 3]:
    # partial blocks at every edge), the norms not, torch_dtype bfloat16.
    m = mla_cases
    x = f32(RNG.normal(0, 1, (B, S, m.DIM)))
    p = "model.layers.0.self_attn."
    cfg = {"model_type": "deepseek_v3", "hidden_size": m.DIM, "num_attention_heads": m.H,
           "num_key_value_heads": m.H, "kv_lora_rank": m.R, "q_lora_rank": m.RQ,
           "qk_nope_head_dim": m.DN, "qk_rope_head_dim": m.DR, "v_head_dim": m.DV,
           "rope_theta": 10000, "max_position_embeddings": 4096, "attention_bias": False,
           "torch_dtype": "bfloat16", "quantization_config": qconfig((5, 3))}
    w = m.weights(q_lora=True)
    names = {r: p + m.ROLES[r] for r in w}
    tensors, deq = quantized(w, ("q_a", "q_b", "kv_a", "kv_b", "o"), names, (5, 3), "bfloat16")
    f = {"inv": inv_freq(1e4, m.DR), "att": 1.0, "kind": "interleave",
         "scale": (m.DN + m.DR) ** -0.5}
    save(out, "deepseek_v3_fp8", cfg, tensors, x, m.mla(x, deq, f), 0)

    # Qwen3-*-FP8: q/k/v/o quantized, q_norm and k_norm not; blocks of
    # [128, 128] (each matrix one partial block); modules_to_not_convert.
    dim, H, K, D = 32, 4, 2, 16
    x = f32(RNG.normal(0, 1, (B, S, dim)))
    w = {"q": f32(RNG.normal(0, dim ** -0.5, (H * D, dim))),
         "k": f32(RNG.normal(0, dim ** -0.5, (K * D, dim))),
         "v": f32(RNG.normal(0, dim ** -0.5, (K * D, dim))),
         "o": f32(RNG.normal(0, (H * D) ** -0.5, (dim, H * D))),
         "qn": f32(1 + RNG.normal(0, 0.2, D)), "kn": f32(1 + RNG.normal(0, 0.2, D))}
    roles = {"q": "q_proj.weight", "k": "k_proj.weight", "v": "v_proj.weight",
             "o": "o_proj.weight", "qn": "q_norm.weight", "kn": "k_norm.weight"}
    names = {r: "model.layers.1.self_attn." + n for r, n in roles.items()}
    base = {"hidden_size": dim, "num_attention_heads": H, "num_key_value_heads": K,
            "head_dim": D, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
            "attention_bias": False}
    cfg = dict(base, model_type="qwen3", rope_theta=1e6, torch_dtype="bfloat16",
               quantization_config=qconfig((128, 128), modules_to_not_convert=["lm_head"]))
    tensors, deq = quantized(w, "qkvo", names, (128, 128), "bfloat16")
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e6, D), "layout": "half", "eps": 1e-6}
    save(out, "qwen3_fp8", cfg, tensors, x, attention(x, deq, f), 1)

    # Llama into float16 (transformers 5's "dtype"), blocks [3, 5].
    w = {r: w[r] for r in "qkvo"}
    cfg = dict(base, model_type="llama", rope_theta=5e5, dtype="float16",
               quantization_config=qconfig((3, 5)))
    tensors, deq = quantized(w, "qkvo", names, (3, 5), "float16")
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(5e5, D), "layout": "half"}
    save(out, "llama_fp8_f16", cfg, tensors, x, attention(x, deq, f), 1)

    # ---- refused ----
    nan = dict(tensors)
    nan[names["k"]] = tensors[names["k"]].copy()
    nan[names["k"]][3, 4] = 0x7f
    no_scale = {k: v for k, v in tensors.items() if k != names["o"] + "_scale_inv"}
    bad_scale = dict(tensors, **{names["v"] + "_scale_inv": np.ones((1, 1), np.float32)})
    static = dict(cfg, quantization_config=qconfig((3, 5), activation_scheme="static"))
    compressed = dict(cfg, quantization_config={"quant_method": "compressed-tensors"})
    skipped = dict(cfg, quantization_config=qconfig((3, 5), modules_to_not_convert=["o_proj"]))
    refusals = [
        ("fp8_nan_code", cfg, nan, "element [3, 4] is the e4m3 NaN code 0x7f"),
        ("fp8_scale_missing", cfg, no_scale, "without its scale"),
        ("fp8_scale_shape", cfg, bad_scale, "v_proj.weight_scale_inv' in"),
        ("fp8_static_activations", static, tensors, '"quantization_config.activation_scheme" '
         'is "static"'),
        ("fp8_compressed_tensors", compressed, tensors, '"compressed-tensors"'),
        ("fp8_not_converted", skipped, tensors, "modules_to_not_convert"),
        ("fp8_without_dtype", {k: v for k, v in cfg.items() if k != "dtype"}, tensors,
         "no torch_dtype"),
    ]
    for name, c, t, refused in refusals:
        save(out, name, c, t, x, None, 1, refused=refused)
