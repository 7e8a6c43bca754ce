"""Multi-head latent attention (DeepSeek-V2, V3, Kimi K2, MiniCPM3) for
make_family_cases.py: tiny checkpoints under the releases' tensor names and
config keys, the layer's output and the gradients of every weight and of x
in float64, written from transformers' modeling code (numpy only).

What the attention does (modeling_deepseek_v3.py's DeepseekV3Attention;
modeling_deepseek_v2.py's DeepseekV2Attention; Kimi K2 runs DeepSeek-V3's
remote modeling_deepseek.py, the same lines):
  q = q_proj(x), or q_b_proj(q_a_layernorm(q_a_proj(x))), viewed
      [B, S, H, Dn + Dr] and split [Dn | Dr]
  kv_a_proj_with_mqa(x) split [r | Dr]: the latent c and k_rot (one head)
  k_pass, v = kv_b_proj(kv_a_layernorm(c)) viewed [B, S, H, Dn + Dv], split
  q_rot, k_rot rotated: V3 with rope_interleave (its default) views each as
      [Dr/2, 2], transposes to [2, Dr/2] and applies rotate_half with
      cos = cat(t, t); V3 without it rotate_half as it is; V2 multiplies the
      pairs (2i, 2i + 1) as complex numbers by freqs_cis; cos and sin (and
      freqs_cis) times the rope's attention factor
  k_rot shared by every head; query = [q_pass | q_rot], key = [k_pass | k_rot]
  softmax(q k^T * scaling + causal) v, then o_proj
  scaling = (Dn + Dr)^-0.5 * mscale^2, mscale = 0.1 mscale_all_dim
      ln(factor) + 1 when the rope is scaled and sets mscale_all_dim
  RMSNorms of epsilon 1e-6 (DeepseekV3RMSNorm's default; rms_norm_eps is
      not theirs), biases on q_a_proj, kv_a_proj_with_mqa and o_proj when
      attention_bias
  yarn (modeling_rope_utils._compute_yarn_parameters) over dim = Dr
      (the config classes set head_dim = qk_rope_head_dim), attention
      factor mscale(factor, mscale) / mscale(factor, mscale_all_dim)
Mistral 4 (modeling_mistral4.py's Mistral4Attention): V3's, the query times
  1 + llama_4_scaling_beta log(1 + floor(position / original_max_position_embeddings))
  (get_llama_4_attn_scale), its rope over head_dim = Dn + Dr at partial_rotary_factor
  Dr / (Dn + Dr): yarn over dim = Dr again; a saved head_dim (set over the sum after
  __post_init__) is its rotary embedding's alone, int(head_dim * factor) features (the
  default rope type: all of head_dim), the factor's default still Dr / (Dn + Dr)
"""
import math

import numpy as np

from make_family_cases import B, S, f32, rms, save

RNG = np.random.default_rng(20261202)
DIM, H, DN, DR, DV, R, RQ = 32, 4, 8, 8, 6, 16, 12
EPS = 1e-6  # DeepseekV3RMSNorm(q_lora_rank), (kv_lora_rank)


def get_mscale(scale, mscale=1.0):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def yarn(theta, dim, factor, original, beta_fast=32.0, beta_slow=1.0, mscale=None,
         mscale_all_dim=None):
    """(inv_freq [dim / 2], attention factor) as _compute_yarn_parameters."""
    pos_freqs = theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim)
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)

    def correction_dim(rotations):
        return dim * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))
    low = max(math.floor(correction_dim(beta_fast)), 0)
    high = min(math.ceil(correction_dim(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    keep = 1 - ramp
    inv = interpolation * (1 - keep) + extrapolation * keep
    if mscale and mscale_all_dim:
        return inv, get_mscale(factor, mscale) / get_mscale(factor, mscale_all_dim)
    return inv, get_mscale(factor)


def rotate_half(t):
    half = t.shape[-1] // 2
    return np.concatenate([-t[..., half:], t[..., :half]], -1)


def rotate(t, ang, att, kind):
    """t [B, S, heads, Dr] by angles ang [B, S, 1, Dr/2]."""
    if kind == "complex":  # V2: view_as_complex(pairs) * freqs_cis * att
        z = t[..., 0::2] + 1j * t[..., 1::2]
        z = z * np.exp(1j * ang) * att
        out = np.empty_like(t)
        out[..., 0::2], out[..., 1::2] = z.real, z.imag
        return out
    if kind == "interleave":  # view(d/2, 2).transpose(4, 3).reshape
        t = t.reshape(*t.shape[:-1], -1, 2).swapaxes(-1, -2).reshape(t.shape)
    emb = np.concatenate([ang, ang], -1)
    return t * (np.cos(emb) * att) + rotate_half(t) * (np.sin(emb) * att)


def mla(x, w, f):
    """The layer in float64; w by role (q or q_a, q_a_norm, q_b; kv_a,
    kv_a_norm, kv_b, o; bq_a, bkv_a, bo), f: inv, att, kind, scale."""
    b, s = x.shape[:2]
    if "q" in w:
        q = x @ w["q"].T
    else:
        q = rms(x @ w["q_a"].T + w.get("bq_a", 0), w["q_a_norm"], EPS) @ w["q_b"].T
    q = q.reshape(b, s, H, DN + DR)
    q_pass, q_rot = q[..., :DN], q[..., DN:]
    compressed = x @ w["kv_a"].T + w.get("bkv_a", 0)
    latent, k_rot = compressed[..., :R], compressed[..., R:][:, :, None, :]
    kv = (rms(latent, w["kv_a_norm"], EPS) @ w["kv_b"].T).reshape(b, s, H, DN + DV)
    k_pass, v = kv[..., :DN], kv[..., DN:]
    pos = np.broadcast_to(np.arange(s, dtype=np.float64), (b, s))
    ang = pos[:, :, None, None] * f["inv"]
    q_rot, k_rot = rotate(q_rot, ang, f["att"], f["kind"]), rotate(k_rot, ang, f["att"], f["kind"])
    query = np.concatenate([q_pass, q_rot], -1)
    if "beta" in f:  # Mistral 4: query * get_llama_4_attn_scale(position_ids, beta, original)
        query = query * (1 + f["beta"] * np.log(1 + np.floor(pos / f["original"])))[..., None, None]
    key = np.concatenate([k_pass, np.broadcast_to(k_rot, k_pass.shape[:-1] + (DR,))], -1)
    scores = np.einsum("bshd,bthd->bhst", query, key) * f["scale"]
    i, j = np.arange(s)[:, None], np.arange(s)[None, :]
    scores = np.where(j <= i, scores, -np.inf)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = np.einsum("bhst,bthd->bshd", p, v).reshape(b, s, H * DV)
    return out @ w["o"].T + w.get("bo", 0)


ROLES = {"q": "q_proj.weight", "q_a": "q_a_proj.weight", "q_a_norm": "q_a_layernorm.weight",
         "q_b": "q_b_proj.weight", "kv_a": "kv_a_proj_with_mqa.weight",
         "kv_a_norm": "kv_a_layernorm.weight", "kv_b": "kv_b_proj.weight", "o": "o_proj.weight",
         "bq_a": "q_a_proj.bias", "bkv_a": "kv_a_proj_with_mqa.bias", "bo": "o_proj.bias"}


def weights(q_lora, biases=False):
    """Random float32-exact weights; the norms near 1."""
    def normal(std, *shape):
        return f32(RNG.normal(0, std, shape))
    w = {"kv_a": normal(DIM ** -0.5, R + DR, DIM), "kv_a_norm": f32(1 + RNG.normal(0, 0.2, R)),
         "kv_b": normal(R ** -0.5, H * (DN + DV), R), "o": normal((H * DV) ** -0.5, DIM, H * DV)}
    if q_lora:
        w.update(q_a=normal(DIM ** -0.5, RQ, DIM), q_a_norm=f32(1 + RNG.normal(0, 0.2, RQ)),
                 q_b=normal(RQ ** -0.5, H * (DN + DR), RQ))
    else:
        w["q"] = normal(DIM ** -0.5, H * (DN + DR), DIM)
    if biases:
        w.update(bq_a=normal(0.1, RQ), bkv_a=normal(0.1, R + DR), bo=normal(0.1, DIM))
    return w


def named(w, prefix):
    return {prefix + ROLES[r]: a for r, a in w.items()}


def save_grads(out, name, x, w, f, prefix):
    """dy.npy; dL/dx (gx.npy) and dL/d(each tensor) (g_<tensor name>.npy)
    for L = sum(mla(x) * dy), by central differences of the float64 layer
    (step 1e-6: errors near 1e-9 of the gradient)."""
    d = out + "/" + name
    dy = f32(RNG.normal(0, 1, x.shape))
    np.save(d + "/dy.npy", dy.astype(np.float32))

    def grad(a):
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            keep = a[i]
            a[i] = keep + 1e-6
            up = np.sum(mla(x, w, f) * dy)
            a[i] = keep - 1e-6
            down = np.sum(mla(x, w, f) * dy)
            a[i] = keep
            g[i] = (up - down) / 2e-6
        return g
    x = x.copy()
    np.save(d + "/gx.npy", grad(x))
    for role in w:
        np.save(d + "/g_%s%s.npy" % (prefix, ROLES[role]), grad(w[role]))


def mla_cases(out):
    x = f32(RNG.normal(0, 1, (B, S, DIM)))
    base = {"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": H,
            "kv_lora_rank": R, "qk_nope_head_dim": DN, "qk_rope_head_dim": DR,
            "v_head_dim": DV, "rms_norm_eps": 1e-2, "attention_dropout": 0.0,
            "first_k_dense_replace": 1, "n_routed_experts": 4, "num_experts_per_tok": 2}
    layers = lambda n: "model.layers.%d.self_attn." % n  # noqa: E731
    d = DN + DR

    # DeepSeek-V2-Lite's shape: q_proj (q_lora_rank null), yarn x40 with
    # mscale = mscale_all_dim = 0.707 (an attention factor of 1, a softmax
    # scale of mscale^2), pairs as complex numbers; transformers 4's keys.
    rope = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
            "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}
    cfg = dict(base, model_type="deepseek_v2", q_lora_rank=None, rope_theta=10000,
               max_position_embeddings=163840, rope_scaling=rope, attention_bias=False,
               topk_method="greedy", aux_loss_alpha=0.001)
    inv, att = yarn(1e4, DR, 40.0, 4096, mscale=0.707, mscale_all_dim=0.707)
    f = {"inv": inv, "att": att, "kind": "complex",
         "scale": d ** -0.5 * get_mscale(40.0, 0.707) ** 2}
    w = weights(q_lora=False)
    save(out, "deepseek_v2_lite", cfg, named(w, layers(1)), x, mla(x, w, f), 1)
    save_grads(out, "deepseek_v2_lite", x, w, f, layers(1))

    # DeepSeek-V3's shape: q_lora_rank, yarn x40 with mscale 0.9 and
    # mscale_all_dim 0.6 (an attention factor as well as the scale),
    # rope_interleave by default, attention_bias.
    rope = {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
            "beta_fast": 32, "beta_slow": 1, "mscale": 0.9, "mscale_all_dim": 0.6}
    cfg = dict(base, model_type="deepseek_v3", q_lora_rank=RQ, rope_theta=10000,
               max_position_embeddings=163840, rope_scaling=rope, attention_bias=True,
               n_group=2, topk_group=1, routed_scaling_factor=2.5)
    inv, att = yarn(1e4, DR, 40.0, 4096, mscale=0.9, mscale_all_dim=0.6)
    f = {"inv": inv, "att": att, "kind": "interleave",
         "scale": d ** -0.5 * get_mscale(40.0, 0.6) ** 2}
    w = weights(q_lora=True, biases=True)
    save(out, "deepseek_v3", cfg, named(w, layers(0)), x, mla(x, w, f), 0)
    save_grads(out, "deepseek_v3", x, w, f, layers(0))
    # its rope's tables at positions 0 .. S-1 ([S, Dr/2], the factor folded in)
    np.save(out + "/deepseek_v3/cos.npy", np.cos(np.arange(S)[:, None] * inv) * att)

    # DeepSeek-V3 with rope_interleave false (rotate_half), transformers 5's
    # rope_parameters, no scaling: scale d^-1/2.
    cfg = dict(base, model_type="deepseek_v3", q_lora_rank=RQ, rope_interleave=False,
               rope_parameters={"rope_type": "default", "rope_theta": 5e4},
               max_position_embeddings=4096, attention_bias=False)
    f = {"inv": 1.0 / 5e4 ** (np.arange(0, DR, 2) / DR), "att": 1.0, "kind": "half",
         "scale": d ** -0.5}
    w = weights(q_lora=True)
    save(out, "deepseek_v3_half", cfg, named(w, layers(0)), x, mla(x, w, f), 0)
    save_grads(out, "deepseek_v3_half", x, w, f, layers(0))

    # Kimi K2 (DeepSeek-V3's remote code): yarn x32 with beta_fast =
    # beta_slow = 1 and mscale = mscale_all_dim = 1, rope_theta 50000.
    rope = {"type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096,
            "beta_fast": 1.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}
    cfg = dict(base, model_type="kimi_k2", q_lora_rank=RQ, rope_theta=50000.0,
               max_position_embeddings=131072, rope_scaling=rope, attention_bias=False)
    inv, att = yarn(5e4, DR, 32.0, 4096, beta_fast=1.0, beta_slow=1.0, mscale=1.0,
                    mscale_all_dim=1.0)
    f = {"inv": inv, "att": att, "kind": "interleave",
         "scale": d ** -0.5 * get_mscale(32.0, 1.0) ** 2}
    w = weights(q_lora=True)
    save(out, "kimi_k2", cfg, named(w, layers(2)), x, mla(x, w, f), 2)

    # MiniCPM3 (DeepSeek-V2's attention, rotate_half's rope whatever
    # rope_interleave says), q_proj (q_lora_rank null), no scaling.
    minicpm3 = dict(base, model_type="minicpm3", q_lora_rank=None, attention_bias=False,
                    rope_parameters={"rope_type": "default", "rope_theta": 1e4})
    f = {"inv": 1.0 / 1e4 ** (np.arange(0, DR, 2) / DR), "att": 1.0, "kind": "half",
         "scale": d ** -0.5}
    w = weights(q_lora=False)
    save(out, "minicpm3", minicpm3, named(w, layers(0)), x, mla(x, w, f), 0)

    # Mistral 4: V3's attention with q scaled by position: original 4, beta 0.2, so positions
    # 0 .. S-1 take factors 1 .. 1 + 0.2 ln 3; the config class's partial_rotary_factor
    # (Dr / (Dn + Dr)) where rope_parameters has none.
    rope = {"rope_type": "yarn", "rope_theta": 1e4, "factor": 4.0,
            "original_max_position_embeddings": 4, "beta_fast": 32.0, "beta_slow": 1.0,
            "mscale": 1.0, "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.2}
    mistral4 = dict(base, model_type="mistral4", q_lora_rank=RQ, max_position_embeddings=64,
                    rope_parameters=rope, attention_bias=True)
    inv, att = yarn(1e4, DR, 4.0, 4, mscale=1.0, mscale_all_dim=1.0)
    f = {"inv": inv, "att": att, "kind": "interleave", "beta": 0.2, "original": 4.0,
         "scale": d ** -0.5 * get_mscale(4.0, 1.0) ** 2}
    w = weights(q_lora=True, biases=True)
    save(out, "mistral4", mistral4, named(w, layers(0)), x, mla(x, w, f), 0)
    save_grads(out, "mistral4", x, w, f, layers(0))
    # A saved head_dim: Mistral4Config sets it over the sum, and its rotary embedding alone
    # reads it: yarn at partial_rotary_factor 0.25 of 32 features is mistral4's rope again;
    # the default rope type over all of head_dim 8 = Dr, the plain rope (no mscale)
    save(out, "mistral4_head_dim", dict(mistral4, head_dim=4 * DR, rope_parameters=dict(
        rope, partial_rotary_factor=0.25)), named(w, layers(0)), x, mla(x, w, f), 0)
    plain_rope = {"rope_type": "default", "rope_theta": 1e4, "llama_4_scaling_beta": 0.2,
                  "original_max_position_embeddings": 4}
    f = dict(f, inv=1.0 / 1e4 ** (np.arange(0, DR, 2) / DR), att=1.0, scale=d ** -0.5)
    save(out, "mistral4_head_dim_default_rope", dict(mistral4, head_dim=DR,
                                                     rope_parameters=plain_rope),
         named(w, layers(0)), x, mla(x, w, f), 0)
    # Mistral4Config's default rope (yarn x128 from 8192, beta 0.1: q's factor 1 below
    # position 8192), q_proj, rotate_half
    cfg = dict(base, model_type="mistral4", q_lora_rank=None, rope_interleave=False,
               max_position_embeddings=1048576)
    inv, att = yarn(1e4, DR, 128.0, 8192, mscale=1.0, mscale_all_dim=1.0)
    f = {"inv": inv, "att": att, "kind": "half", "scale": d ** -0.5 * get_mscale(128.0) ** 2}
    w = weights(q_lora=False)
    save(out, "mistral4_default_rope", cfg, named(w, layers(0)), x, mla(x, w, f), 0)

    # ---- refused: each would run wrong, or not as transformers, if allowed ----
    v3 = dict(base, model_type="deepseek_v3", q_lora_rank=RQ, attention_bias=False)
    w = weights(q_lora=True)
    plain = named(w, layers(0))
    bad_kv_b = dict(plain, **{layers(0) + "kv_b_proj.weight": w["kv_b"][:-1]})
    fp8 = dict(plain, **{layers(0) + "q_a_proj.weight": np.zeros((RQ, DIM), np.uint8),
                         layers(0) + "q_a_proj.weight_scale_inv": f32(np.ones((1, 1)))})
    ling = dict(base, model_type="bailing_hybrid", layer_types=["full_attention"])
    ling_tensors = named(weights(q_lora=False), layers(0))
    g_proj = f32(np.ones((H, DIM)))
    refusals = [
        ("deepseek_kv_b_proj_bias", v3,
         dict(plain, **{layers(0) + "kv_b_proj.bias": f32(np.zeros(H * (DN + DV)))}),
         "tensor 'model.layers.0.self_attn.kv_b_proj.bias' in"),
        ("deepseek_q_a_proj_bias_without_attention_bias", v3,
         dict(plain, **{layers(0) + "q_a_proj.bias": f32(np.zeros(RQ))}),
         "does not set attention_bias true"),
        ("deepseek_kv_b_proj_shape", v3, bad_kv_b,
         "tensor 'model.layers.0.self_attn.kv_b_proj.weight' in"),
        ("deepseek_fp8_without_quantization_config", v3, fp8,
         "is F8_E4M3, but the config has no quantization_config"),
        ("deepseek_q_proj_with_q_lora_rank", v3,
         dict(named(weights(q_lora=False), layers(0))), "sets q_lora_rank (q goes through"),
        ("deepseek_v2_rope_interleave_false", dict(v3, model_type="deepseek_v2",
                                                   rope_interleave=False), plain,
         '"rope_interleave" is false'),
        ("minicpm3_rope_interleave_true", dict(minicpm3, q_lora_rank=RQ, rope_interleave=True),
         plain, '"rope_interleave" is true, and model_type "minicpm3" pairs the rope\'s '
         'features as rotate_half'),
        # MiniCPM3Config: v_head_dim null is hidden_size / num_attention_heads (8, not DV)
        ("minicpm3_v_head_dim_from_heads", dict(minicpm3, q_lora_rank=RQ, v_head_dim=None),
         plain, "v_head_dim 8"),
        ("deepseek_head_dim", dict(v3, head_dim=DN + DR), plain, '"head_dim" is 16'),
        ("deepseek_kv_heads", dict(v3, num_key_value_heads=1), plain,
         '"num_key_value_heads" is 1'),
        ("deepseek_partial_rotary", dict(v3, partial_rotary_factor=0.5), plain,
         "partial_rotary_factor 0.5"),
        ("deepseek_softcap", dict(v3, attn_logit_softcapping=30.0), plain,
         '"attn_logit_softcapping"'),
        ("deepseek_yarn_without_factor", dict(v3, max_position_embeddings=8192, rope_scaling={
            "type": "yarn", "original_max_position_embeddings": 4096, "mscale_all_dim": 1.0}),
         plain, 'rope type yarn without "factor"'),
        # Ling's gate per head (g_proj [H, dim]): where the family has it, and
        # nowhere else
        ("bailing_hybrid_without_g_proj", ling, ling_tensors, "has no g_proj.weight beside"),
        ("bailing_hybrid_g_proj_shape", ling,
         dict(ling_tensors, **{layers(0) + "g_proj.weight": f32(np.ones((H * DV, DIM)))}),
         "(the output gate: one per query head)"),
        ("deepseek_stray_g_proj", v3, dict(plain, **{layers(0) + "g_proj.weight": g_proj}),
         "ropeattn does not use it"),
        # A.X-K2's q_b_proj (q_gate_proj once loaded): queries and a gate per output
        # feature from the q latent normed and not, [H (D + Dv), 2 rq] (run: tests/hf's
        # axk2_q_gate_proj); nowhere else
        ("axk2_q_b_proj_shape", dict(v3, model_type="axk2"), plain,
         "tensor 'model.layers.0.self_attn.q_b_proj.weight' in"),
        ("axk2_q_lora_rank_null", dict(v3, model_type="axk2", q_lora_rank=None),
         ling_tensors, 'model_type "axk2"\'s q_gate_proj reads the q latent'),
        ("deepseek_stray_q_gate_proj", v3, dict(plain, **{
            layers(0) + "q_gate_proj.weight": w["q_b"]}), "ropeattn does not use it"),
        # Mistral 4: what its code fails on, or reads otherwise
        ("mistral4_default_rope_type", dict(mistral4, rope_parameters={
            "rope_type": "default", "rope_theta": 1e4, "llama_4_scaling_beta": 0.1}), plain,
         "rotary embedding gives 16 features (its default rope type: all of head_dim 16)"),
        ("mistral4_partial_rotary_factor", dict(mistral4, rope_parameters=dict(
            rope, partial_rotary_factor=0.25)), plain,
         "rotary embedding gives 4 features (partial_rotary_factor of head_dim 16)"),
        ("mistral4_top_level_partial_rotary_factor", dict(mistral4, partial_rotary_factor=0.25),
         plain, '"partial_rotary_factor" 0.25 at the top level'),
        ("mistral4_without_beta", dict(mistral4, rope_parameters={
            k: v for k, v in rope.items() if k != "llama_4_scaling_beta"}), plain,
         "lack llama_4_scaling_beta (transformers fails on it)"),
        # (its factor Dr / (Dn + Dr) whatever head_dim is saved: 4 features of head_dim 8)
        ("mistral4_head_dim_factor", dict(mistral4, head_dim=DR), plain,
         "rotary embedding gives 4 features (partial_rotary_factor of head_dim 8)"),
        ("llama_kv_lora_rank", {"model_type": "llama", "kv_lora_rank": R,
                                "num_attention_heads": H}, plain,
         '"kv_lora_rank" (latent attention) changes attention and is not supported for '
         'model_type "llama"'),
    ]
    for name, cfg, tensors, refused in refusals:
        save(out, name, cfg, tensors, x, None, 0, refused=refused)

    from dsa_cases import dsa_cases  # DeepSeek-V3.2, GLM-MoE-DSA: tests/families/dsa_cases.py
    dsa_cases(out, x, base)
