"""Tiny checkpoints of each model family, with the tensor names and config
keys their Hugging Face releases use, and the attention layer's output in
float64, written from transformers' modeling code for that family (numpy
only: this runs where transformers does not).

    python3 make_family_cases.py OUT

writes OUT/<case>/{config.json, model.safetensors, x.npy, y.npy, case.json}
for the cases that must run, and OUT/<case>/{config.json, model.safetensors,
x.npy, case.json} with the expected refusal for the cases that must be
refused.  case.json: {"layer": N or null, "args": [...], "refused": text}.

What each family's attention does, from transformers' modeling_<family>.py:
  granite    scaling = config.attention_multiplier
  gemma3     q_norm, k_norm per head, Gemma3RMSNorm: x / rms * (1 + w);
             scaling = query_pre_attn_scalar ** -0.5; sliding layers use
             rope_local_base_freq with the default rope, full layers
             rope_theta with rope_scaling (linear here); every sixth layer
             full (sliding_window_pattern 6); transformers 5: each layer
             type's rope from rope_parameters[layer_type]
  olmo2      q_norm over the whole q projection [H * D], k_norm over k's
  smollm3    no_rope_layers[i] == 0: layer i skips apply_rotary_pos_emb
  cohere     rotate_half on interleaved pairs (x[..., ::2], x[..., 1::2]),
             cos/sin repeat_interleave'd; use_qk_norm: CohereLayerNorm of
             [B, S, H, D] with weight [H, D] (each head its own), eps
             layer_norm_eps, before RoPE
  stablelm   qk_layernorm: StableLmLayerNormPerHead, one nn.LayerNorm(D,
             bias=False) per head (q_layernorm.norms.N), before RoPE
  glm, glm4  interleaved pairs over the first rotary_dim features
             (partial_rotary_factor 0.5), q/k/v biases
  olmo       q, k, v clamped to [-clip_qkv, clip_qkv] after the projections
  phi        q_proj, k_proj, v_proj, dense, all with biases; partial rotary
  phi3       qkv_proj: the rows of q_proj, k_proj, v_proj in that order
  gptj       rotate_every_two (interleaved) on the first rotary_dim features
  gpt_neox   query_key_value viewed as [B, S, H, 3 D] and split per head;
             rotate_half on the first int(D * rotary_pct) features
  falcon     query_key_value split by FalconAttention._split_heads:
             new_decoder_architecture: [B, S, Hkv, H/Hkv + 2, D]; else
             multi_query (the default): [B, S, H + 2, D]; else [B, S, H, 3, D];
             rotate_half; dense
  internlm2  wqkv as "b q (h gs d) -> b q h gs d", gs = H/Hkv + 2: each
             group's query heads, then its key, then its value; wo
  chatglm    (ChatGLM 2, 3 and GLM-4's remote modeling_chatglm.py)
             query_key_value split [H D, G D, G D] with multi_query_attention
             (G = multi_query_group_num), else viewed [H, 3 D]; head_dim
             kv_channels; RotaryEmbedding(kv_channels // 2) with base
             10000 * rope_ratio: interleaved pairs of the first D / 2
             features; dense
  llama4     (Llama4TextAttention) q, k rotated as complex pairs (interleaved),
             then in RoPE layers (no_rope_layers[i] = 1) the L2 norm
             x * rsqrt(mean(x^2) + rms_norm_eps); in NoPE layers q times
             1 + attn_scale * log1p(floor((cache_position + 1) / floor_scale));
             rope llama3 (Scout: low_freq_factor = high_freq_factor)
  mistral3   a Mistral text model in text_config, names under
             language_model.model.layers.N
  qwen2_vl   rope type mrope: with text positions (all three ids equal) it
             is the default rope; q/k/v biases.  With 3-D position_ids [3, B, S]
             (get_rope_index: text, then an image's t x h x w grid offset by
             the text before it, then text from the grid's largest + 1):
             freqs[c] = pos[c] * inv_freq, emb = cat(freqs, freqs), and
             apply_multimodal_rotary_pos_emb takes cos, sin split by
             mrope_section * 2, piece k from component k % 3
  qwen2_5_vl the same; a video's temporal index is t * second_per_grid_t *
             tokens_per_second (1.0 * 2 here: steps of 2)
  qwen3_vl   q_norm, k_norm (Qwen3); apply_interleaved_mrope on the
             frequencies: freqs[0] with indices 1, 4, ... below 3 s1 from
             height and 2, 5, ... below 3 s2 from width, then cat(f, f)
  masks      (masking_utils.py) key j seen by query i when j <= i, j > i - W
             in sliding layers (Mistral: all; Qwen2: from max_window_layers;
             Gemma 2, gpt-oss: layer_types, by default even layers), and
             j // C == i // C in Llama 4's chunked layers, i and j the tokens'
             places; Gemma 2 caps the scaled logits, c tanh(s / c), before
             the mask; gpt-oss appends its sinks as a last softmax column and
             drops it after
"""
import json
import math
import os
import struct
import sys

import numpy as np

RNG = np.random.default_rng(20261201)
B, S = 2, 12


def write_safetensors(path, tensors):
    """tensors: {name: array}, written as F32 (booleans as BOOL, uint8 as
    F8_E4M3's bytes)."""
    header, data, at = {}, b"", 0
    for name, a in tensors.items():
        dtype = {np.dtype(np.bool_): "BOOL", np.dtype(np.uint8): "F8_E4M3"}.get(a.dtype, "F32")
        raw = np.ascontiguousarray(a, dtype="<f4" if dtype == "F32" else np.uint8).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [at, at + len(raw)]}
        data += raw
        at += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def f32(a):
    """The float32 value the checkpoint stores, in float64."""
    return np.asarray(a, dtype=np.float32).astype(np.float64)


def rms(x, w, eps, plus_one=False):
    x = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * ((1.0 + w) if plus_one else w)


def layer_norm(x, w, eps):
    """LayerNorm without bias over the last axis; w broadcasts ([H, D]: each
    head its own weights)."""
    x = x - np.mean(x, axis=-1, keepdims=True)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def inv_freq(theta, rot):
    return 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)


def yarn_inv_freq(theta, rot, factor, original, truncate=True):
    """(inv_freq, attention factor) as transformers 5's
    _compute_yarn_parameters (beta_fast 32, beta_slow 1, no mscale); truncate
    false leaves the correction range unrounded."""
    pos_freqs = theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)

    def correction_dim(rotations):
        return rot * math.log(original / (rotations * 2 * math.pi)) / (2 * math.log(theta))
    low, high = correction_dim(32.0), correction_dim(1.0)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rot - 1)
    if low == high:
        high += 0.001
    keep = 1 - np.clip((np.arange(rot // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    inv = 1.0 / (factor * pos_freqs) * (1 - keep) + 1.0 / pos_freqs * keep
    return inv, 0.1 * math.log(factor) + 1.0


def rope(x, pos, inv, layout, att=1.0):
    """x [B, S, heads, D]; the first 2 * len(inv) features rotate, cos and
    sin times att (the rope type's attention factor)."""
    rot = 2 * len(inv)
    ang = pos[:, :, None, None] * inv  # [B, S, 1, rot/2]
    c, s = np.cos(ang) * att, np.sin(ang) * att
    y = x.copy()
    if layout == "half":
        a, b = x[..., : rot // 2], x[..., rot // 2: rot]
        y[..., : rot // 2] = a * c - b * s
        y[..., rot // 2: rot] = b * c + a * s
    else:
        a, b = x[..., 0:rot:2], x[..., 1:rot:2]
        y[..., 0:rot:2] = a * c - b * s
        y[..., 1:rot:2] = b * c + a * s
    return y


def mrope_cos_sin(pos3, inv, section, interleaved):
    """cos, sin [..., D] for pos3 [3, ...] as transformers puts them
    together: Qwen2-VL's apply_multimodal_rotary_pos_emb (cat(freqs, freqs)
    of each component, split by mrope_section * 2, piece k from component
    k % 3) or Qwen3-VL's apply_interleaved_mrope (on the frequencies, then
    cat(f, f))."""
    freqs = pos3[..., None] * inv  # [3, ..., D/2]
    if interleaved:
        f = freqs[0].copy()
        for dim in (1, 2):
            idx = slice(dim, section[dim] * 3, 3)
            f[..., idx] = freqs[dim][..., idx]
        emb = np.concatenate([f, f], -1)
        return np.cos(emb), np.sin(emb)
    emb = np.concatenate([freqs, freqs], -1)  # [3, ..., D]
    bounds = np.cumsum(list(section) * 2)[:-1]
    pick = lambda t: np.concatenate(  # noqa: E731
        [m[i % 3] for i, m in enumerate(np.split(t, bounds, -1))], -1)
    return pick(np.cos(emb)), pick(np.sin(emb))


def mrope(x, pos3, inv, section, interleaved):
    """x [B, S, heads, D] with rotate_half; pos3 [3, B, S]; every feature
    rotates."""
    cos, sin = mrope_cos_sin(pos3, inv, section, interleaved)
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    half = x.shape[-1] // 2
    return x * cos + np.concatenate([-x[..., half:], x[..., :half]], -1) * sin


def rope_index(parts):
    """transformers' get_rope_index for one sequence: parts are ("text", n)
    or ("grid", t, h, w, t_step) (the grid after the spatial merge; t_step:
    Qwen2.5-VL's second_per_grid_t * tokens_per_second, 1 elsewhere).
    Returns [3, S]."""
    out, st = [], 0
    for p in parts:
        if p[0] == "text":
            out.append(np.broadcast_to(np.arange(p[1]) + st, (3, p[1])))
        else:
            _, t, h, w, step = p
            ti, hi, wi = np.meshgrid(np.arange(t) * step, np.arange(h), np.arange(w),
                                     indexing="ij")
            out.append(np.stack([ti.ravel(), hi.ravel(), wi.ravel()]) + st)
        st = out[-1].max() + 1
    return np.concatenate(out, 1)


def llama3_inv_freq(theta, rot, factor, low, high, old):
    """transformers' _compute_llama3_parameters."""
    inv = inv_freq(theta, rot)
    wavelen = 2 * np.pi / inv
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    with np.errstate(divide="ignore", invalid="ignore"):  # low == high: no medium band
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old / high) & ~(wavelen > old / low)
    return np.where(medium, smoothed, scaled)


def attention(x, w, f):
    """The layer in float64.  w: tensors by role; f: the family's choices
    (f["allowed"], [B, S, S] booleans: more keys masked, as padding)."""
    H, K, D = f["H"], f["K"], f["D"]
    B, S = x.shape[:2]
    q = x @ w["q"].T + w.get("bq", 0)
    k = x @ w["k"].T + w.get("bk", 0)
    v = x @ w["v"].T + w.get("bv", 0)
    if f.get("clip"):
        q, k, v = (np.clip(t, -f["clip"], f["clip"]) for t in (q, k, v))
    if f.get("whole_norm"):
        q, k = rms(q, w["qn"], f["eps"]), rms(k, w["kn"], f["eps"])
    q, k, v = (t.reshape(B, S, -1, D) for t in (q, k, v))
    if f.get("layer_norm"):
        q, k = layer_norm(q, w["qn"], f["eps"]), layer_norm(k, w["kn"], f["eps"])
    elif "qn" in w and not f.get("whole_norm"):
        q = rms(q, w["qn"], f["eps"], f.get("plus_one", False))
        k = rms(k, w["kn"], f["eps"], f.get("plus_one", False))
    pos = np.broadcast_to(np.arange(S, dtype=np.float64) + f.get("start", 0), (B, S))
    if f.get("pos3") is not None:  # M-RoPE: 3-D position_ids [3, B, S]
        sec, inter = f["mrope"]
        q, k = (mrope(t, f["pos3"].astype(np.float64), f["inv"], sec, inter) for t in (q, k))
    elif f.get("inv") is not None:
        att = f.get("att", 1.0)
        q, k = rope(q, pos, f["inv"], f["layout"], att), rope(k, pos, f["inv"], f["layout"], att)
    if f.get("l2"):  # Llama 4: after RoPE, no weights
        q, k = (t / np.sqrt(np.mean(t * t, axis=-1, keepdims=True) + f["l2"]) for t in (q, k))
    if f.get("temperature"):  # Llama 4's NoPE layers, at cache_position = pos
        floor_scale, attn_scale = f["temperature"]
        q = q * (1 + attn_scale * np.log1p(np.floor((pos + 1) / floor_scale)))[..., None, None]
    if f.get("q_scaling"):  # Ministral 3: at position_ids, after RoPE
        beta, original = f["q_scaling"]
        q = q * (1 + beta * np.log(1 + np.floor(pos / original)))[..., None, None]
    k, v = np.repeat(k, H // K, axis=2), np.repeat(v, H // K, axis=2)
    scores = np.einsum("bshd,bthd->bhst", q, k) * f.get("scale", D ** -0.5)
    if f.get("softcap"):  # Gemma 2: before the mask
        scores = f["softcap"] * np.tanh(scores / f["softcap"])
    # masking_utils: causal, sliding_window_overlay, chunked_overlay, on the
    # tokens' places (cache_position), not their position ids
    i, j = np.arange(S)[:, None], np.arange(S)[None, :]
    keep = j <= i
    if f.get("window"):
        keep &= j > i - f["window"]
    if f.get("chunk"):
        keep &= j // f["chunk"] == i // f["chunk"]
    if f.get("allowed") is not None:
        keep = keep & f["allowed"][:, None]
    scores = np.where(keep, scores, -np.inf)
    if f.get("additive") is not None:  # SDPA's float attn_mask, [B|1, H|1, S, S]
        scores = scores + f["additive"]
    if "sinks" in w:  # gpt-oss: a last column of one logit per head, dropped after
        sink = np.broadcast_to(w["sinks"].astype(np.float64)[None, :, None, None],
                               scores.shape[:-1] + (1,))
        scores = np.concatenate([scores, sink], -1)
    p = np.exp(scores - scores.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    if "sinks" in w:
        p = p[..., :-1]
    out = np.einsum("bhst,bthd->bshd", p, v).reshape(B, S, H * D)
    return out @ w["o"].T + w.get("bo", 0)


def weights(dim, H, K, D, biases="", norms=None):
    """Random float32-exact weights; biases: which of "qkvo"; norms: "head"
    ([D]), "whole" ([H D] and [K D]) or "heads" ([H, D] and [K, D])."""
    w = {"q": f32(RNG.normal(0, dim ** -0.5, (H * D, dim))),
         "k": f32(RNG.normal(0, dim ** -0.5, (K * D, dim))),
         "v": f32(RNG.normal(0, dim ** -0.5, (K * D, dim))),
         "o": f32(RNG.normal(0, (H * D) ** -0.5, (dim, H * D)))}
    sizes = {"q": H * D, "k": K * D, "v": K * D, "o": dim}
    for p in biases:
        w["b" + p] = f32(RNG.normal(0, 0.1, sizes[p]))
    if norms:
        nq, nk = {"head": (D, D), "whole": (H * D, K * D), "heads": ((H, D), (K, D))}[norms]
        w["qn"] = f32(1 + RNG.normal(0, 0.2, nq))
        w["kn"] = f32(1 + RNG.normal(0, 0.2, nk))
    return w


ROLES = {"q": "q_proj.weight", "k": "k_proj.weight", "v": "v_proj.weight",
         "o": "o_proj.weight", "bq": "q_proj.bias", "bk": "k_proj.bias",
         "bv": "v_proj.bias", "bo": "o_proj.bias", "qn": "q_norm.weight",
         "kn": "k_norm.weight", "sinks": "sinks"}


def named(w, prefix, roles=ROLES):
    return {prefix + roles[r]: a for r, a in w.items()}


def save(out, name, config, tensors, x, y=None, layer=None, args=(), refused=None,
         positions=None):
    """positions: int64 --positions (positions.npy), given on every run."""
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    if positions is not None:
        np.save(os.path.join(d, "positions.npy"), np.asarray(positions, dtype=np.int64))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    np.save(os.path.join(d, "x.npy"), x.astype(np.float32))
    if y is not None:
        np.save(os.path.join(d, "y.npy"), y)
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump({"layer": layer, "args": list(args), "refused": refused}, f)


def save_grads(out, name, x, w, f, roles=()):
    """dy.npy, and dL/dx (gx.npy) and dL/dw[role] (g_<role>.npy) for L =
    sum(attention(x) * dy), by central differences of the float64 layer
    (step 1e-6: errors near 1e-9 of the gradient)."""
    d = os.path.join(out, name)
    dy = f32(RNG.normal(0, 1, x.shape))
    np.save(os.path.join(d, "dy.npy"), dy.astype(np.float32))
    def grad(a, call):
        g = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            keep = a[i]
            a[i] = keep + 1e-6
            up = np.sum(call() * dy)
            a[i] = keep - 1e-6
            down = np.sum(call() * dy)
            a[i] = keep
            g[i] = (up - down) / 2e-6
        return g
    x = x.copy()
    np.save(os.path.join(d, "gx.npy"), grad(x, lambda: attention(x, w, f)))
    for r in roles:
        np.save(os.path.join(d, "g_%s.npy" % r), grad(w[r], lambda: attention(x, w, f)))


def stacks_refusals(base, w):
    """HRM-Text: two stacks of layers run in cycles, a layer number a cache
    slot (num_layers_per_stack 1, H_cycles 2, L_cycles 3: 8 slots), its
    checkpoint's attn.gqkv_proj (the output gate's rows, q's, k's, v's):
    no layer given, a slot past the last, num_hidden_layers that is not the
    slots' count, and gqkv_proj's bias (the gate's first)."""
    mha = dict({k: v for k, v in base.items() if k != "num_key_value_heads"},
               model_type="hrm_text", num_hidden_layers=8, num_layers_per_stack=1, H_cycles=2,
               L_cycles=3)
    gqkv = np.concatenate([w["q"]] * 4)
    stacks = {f"model.{m}_module.layers.0.attn.{n}.weight": t
              for m in "LH" for n, t in (("gqkv_proj", gqkv), ("o_proj", w["o"]))}
    slots = 'runs its two stacks of layers in cycles, 8 cache slots (num_hidden_layers): ' \
            'give the layer, a slot from 0 to 7'
    biased = dict(stacks, **{"model.L_module.layers.0.attn.gqkv_proj.bias": gqkv[:, 0].copy()})
    return [("hrm_text_without_layer", mha, stacks, slots, None),
            ("hrm_text_past_slots", mha, stacks, slots, 8),
            ("hrm_text_slots_mismatch", dict(mha, num_hidden_layers=6), stacks,
             '"num_hidden_layers" 6 is not num_layers_per_stack * H_cycles * (L_cycles + 1) = 8'),
            ("hrm_text_gate_bias", dict(mha, attention_bias=True), biased,
             "the output gate's bias (its first rows) is not supported")]


def gates_refusals(base, plain, prefix, H, D, dim):
    """Laguna (its output times softplus(g_proj(x)), per head by gating, query
    heads per layer): without g_proj, a g_proj of the other granularity,
    gating of another value, num_attention_heads_per_layer not one per layer
    or differing where no layer is named; a g_proj where the family has none."""
    rope = {"full_attention": {"rope_type": "default", "rope_theta": 1e4},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}
    laguna = dict(base, model_type="laguna", num_hidden_layers=1, rope_parameters=rope,
                  layer_types=["full_attention"])
    qk = {prefix + n: f32(np.ones(D)) for n in ("q_norm.weight", "k_norm.weight")}
    per_head = dict(plain, **qk, **{prefix + "g_proj.weight": f32(np.ones((H, dim)))})
    two = dict(laguna, num_hidden_layers=2, num_attention_heads_per_layer=[4, 2],
               layer_types=["full_attention"] * 2)
    return [
        ("laguna_without_g_proj", laguna, dict(plain, **qk),
         'has no g_proj.weight beside \'model.layers.0.self_attn.o_proj.weight\': model_type '
         '"laguna" gates'),
        ("laguna_g_proj_per_feature", dict(laguna, gating="per-element"), per_head,
         "is not [%d, %d] (the output gate: one per output feature)" % (H * D, dim)),
        ("laguna_gating_unknown", dict(laguna, gating="per-token"), per_head,
         '"gating" must be true, false, "per-head" or "per-element"'),
        ("laguna_heads_per_layer_length", dict(laguna, num_attention_heads_per_layer=[4, 4]),
         per_head, '"num_attention_heads_per_layer" has 2 entries, not num_hidden_layers (1)'),
        ("laguna_heads_differ_no_layer", two,
         {n[len(prefix):]: a for n, a in per_head.items()},
         "num_attention_heads_per_layer gives the layers different counts of query heads", None),
        ("llama_stray_g_proj", dict(base, model_type="llama", rope_theta=1e4),
         dict(plain, **{prefix + "g_proj.weight": f32(np.ones((H, dim)))}),
         "tensor 'model.layers.0.self_attn.g_proj.weight' in"),
        ("llama_heads_per_layer", dict(base, model_type="llama",
                                       num_attention_heads_per_layer=[4]), plain,
         '"num_attention_heads_per_layer" (query heads per layer) changes attention'),
    ] + beam_refusals(base, plain, qk, prefix, H, D, dim)


def beam_refusals(base, plain, qk, prefix, H, D, dim):
    """Beam (gate_proj and a bias per head, gate_bias; its full layers'
    rope null: no RoPE, q scaled by position: tests/hf/beam_nope_scaled):
    without gate_bias, gate_bias not one per head; gate_bias where the
    family has none."""
    rope = {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
            "full_attention": None}
    beam = dict(base, model_type="beam", num_hidden_layers=1, rope_parameters=rope,
                layer_types=["full_attention"], sliding_window=4)
    gated = dict(plain, **qk, **{prefix + "gate_proj.weight": f32(np.ones((H * D, dim)))})
    bias = lambda n: {prefix + "gate_bias": f32(np.ones(n))}  # noqa: E731
    return [
        ("beam_without_gate_bias", beam, gated,
         "has no output gate's bias per head (gate_bias) beside"),
        ("beam_gate_bias_per_feature", beam, dict(gated, **bias(H * D)),
         "is not [%d] (the output gate's bias, one per head)" % H),
        ("llama_stray_gate_bias", dict(base, model_type="llama", rope_theta=1e4),
         dict(plain, **bias(H)), 'model_type "llama" has no output gate\'s bias per head'),
    ]


def qk_norms_refusals(base, plain, prefix, H, K, D):
    """Issue 41's families that stay refused, and the q/k norm and o_proj
    norm tensors a family's model would not load or would initialize."""
    ones = lambda *shape: f32(np.ones(shape))  # noqa: E731
    qk = {prefix + "q_norm.weight": ones(D), prefix + "k_norm.weight": ones(D)}
    after = {prefix + "query_layernorm.weight": ones(D), prefix + "key_layernorm.weight": ones(D)}
    sub_norm = {prefix + "attn_sub_norm.weight": ones(H * D)}
    # (head_dim is hidden_size / num_attention_heads there)
    compass = dict({k: v for k, v in base.items() if k != "head_dim"},
                   model_type="cohere_compass_text")
    return [
        # NanoChat runs (RoPE by the opposite angle: tests/hf/nanochat_*); its
        # weightless q/k norm after RoPE is computed before it, which a rope
        # scaling cos and sin (yarn's attention factor) would change
        ("nanochat_yarn", dict(base, model_type="nanochat", rope_parameters={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
            "rope_theta": 10000.0}), plain,
         "qk_l2_norm with a rope whose attention factor is"),
        # MiniMax-M3 (tests/hf/minimax_m3_sparse): a "minimax_m3_sparse" layer's indexer
        # keeps index_topk_blocks = 2 blocks of index_block_size = 4 keys: every key up to 8,
        # and the 12 tokens' last queries see more
        ("minimax_m3_vl_text_past_blocks", dict(
            base, model_type="minimax_m3_vl_text", rotary_dim=8, index_block_size=4,
            index_topk_blocks=2, layer_types=["minimax_m3_sparse"]), dict(plain, **qk),
         'block-sparse indexer keeps each query\'s index_topk_blocks blocks of index_block_size '
         'keys: all its keys only while a query sees at most index_topk_blocks * '
         'index_block_size = 8: the layer\'s queries see up to 12 keys'),
        ("minimax_m3_vl_text_sparse_config", dict(
            base, model_type="minimax_m3_vl_text", sparse_attention_config={
                "sparse_block_size": 4}), dict(plain, **qk),
         '"sparse_attention_config" (its keys replace index_block_size'),
        # Qwen4-Exp (tests/hf/qwen4_exp_qsa): QSA keeps indexer_budget = 4 keys in blocks of
        # indexer_compress_ratio = 4, and the last incomplete block: every key up to 7
        ("qwen4_exp_text_past_budget", dict(
            base, model_type="qwen4_exp_text", indexer_n_heads=2, indexer_kv_heads=1,
            indexer_head_dim=8, indexer_budget=4, indexer_compress_ratio=4,
            layer_types=["indexed_attention"]), dict(plain, **qk),
         "indexer_budget + indexer_compress_ratio - 1 = 7: the layer's queries see up to 12 "
         "keys"),
        ("qwen4_exp_text_no_budget", dict(
            base, model_type="qwen4_exp_text", indexer_n_heads=2, indexer_kv_heads=1,
            indexer_head_dim=8, indexer_compress_ratio=4), dict(plain, **qk),
         'no "indexer_budget": model_type "qwen4_exp_text" builds its indexer from it'),
        ("qwen4_exp_text_kv_heads", dict(
            base, model_type="qwen4_exp_text", indexer_n_heads=2, indexer_kv_heads=2,
            indexer_head_dim=8, indexer_budget=4, indexer_compress_ratio=4), dict(plain, **qk),
         '"indexer_kv_heads" is 2; model_type "qwen4_exp_text" requires 1'),
        # Cohere Compass (tests/hf/cohere_compass_*): rope_parameters by layer type
        ("cohere_compass_text_flat_rope", dict(
            compass, rope_parameters={
                "rope_type": "default", "rope_theta": 10000.0}), plain,
         '"rope_parameters.rope_type": model_type "cohere_compass_text" reads rope_parameters '
         'by layer type'),
        ("cohere_compass_text_no_sliding_rope", dict(
            compass, sliding_window=4,
            layer_types=["sliding_attention"], rope_parameters={"full_attention": None}), plain,
         'layer_types names sliding_attention layers and rope_parameters has no '
         '"sliding_attention"'),
        ("cohere_compass_text_head_dim", dict(
            base, model_type="cohere_compass_text", rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1e4}}), plain,
         '"head_dim" is 16, and model_type "cohere_compass_text" sets it to hidden_size / '
         'num_attention_heads = 8'),
        ("cohere_compass_text_linear", dict(
            compass, rope_parameters={
                "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4}}),
         plain, '"rope_parameters.full_attention.rope_type" is "linear"'),
        ("cohere_compass_text_partial", dict(
            compass, partial_rotary_factor=0.5, rope_parameters={
                "full_attention": {"rope_type": "default", "rope_theta": 1e4}}), plain,
         '"partial_rotary_factor" is set, and model_type "cohere_compass_text"\'s default rope'),
        ("cohere_compass_text_no_theta", dict(
            compass, rope_parameters={
                "full_attention": {"rope_type": "default"}}), plain,
         'no rope_theta for the full_attention layers'),
        ("llama_indexer_budget", dict(base, model_type="llama", indexer_budget=8), plain,
         '"indexer_budget" (a block-sparse indexer\'s keys) changes attention'),
        ("olmoe_without_norms", dict(base, model_type="olmoe", clip_qkv=8.0), plain,
         'has no q_norm.weight beside'),
        ("bitnet_without_sub_norm", dict(base, model_type="bitnet"), plain,
         "has no attn_sub_norm.weight beside 'model.layers.0.self_attn.o_proj.weight'"),
        ("llama_with_sub_norm", dict(base, model_type="llama"), dict(plain, **sub_norm),
         "tensor 'model.layers.0.self_attn.attn_sub_norm.weight' in"),
        ("bitnet_sub_norm_shape", dict(base, model_type="bitnet"),
         dict(plain, **{prefix + "attn_sub_norm.weight": ones(D)}),
         "is not a vector of %d values (the columns of" % (H * D)),
        ("hunyuan_q_norm_names", dict(base, model_type="hunyuan_v1_dense"), dict(plain, **qk),
         'names its q/k norms query_layernorm.weight and key_layernorm.weight'),
        ("hunyuan_without_norms", dict(base, model_type="hunyuan_v1_dense"), plain,
         "has no query_layernorm.weight beside"),
        ("qwen3_query_layernorm_names", dict(base, model_type="qwen3"), dict(plain, **after),
         'names its q/k norms q_norm.weight and k_norm.weight'),
        # HunYuan's alpha stretches the base by head_dim / (head_dim - 2)
        ("hunyuan_alpha_without_head_dim",
         dict({k: v for k, v in base.items() if k != "head_dim"}, model_type="hunyuan_v1_dense",
              rope_scaling={"type": "dynamic", "alpha": 1000.0, "factor": 1.0}),
         dict(plain, **after), "the rope's alpha stretches its base"),
        ("glm4_moe_use_qk_norm_without_norms", dict(base, model_type="glm4_moe",
                                                     use_qk_norm=True), plain,
         'has no q_norm.weight beside'),
        ("glm4_moe_norms_without_use_qk_norm", dict(base, model_type="glm4_moe"),
         dict(plain, **qk), 'model_type "glm4_moe" reads no such q/k norm'),
    ]


def family_cases(out):
    dim, H, K, D = 32, 4, 2, 16
    x = f32(RNG.normal(0, 1, (B, S, dim)))
    base = {"hidden_size": dim, "num_attention_heads": H, "num_key_value_heads": K,
            "head_dim": D, "max_position_embeddings": 4096, "rms_norm_eps": 1e-6,
            "attention_dropout": 0.0}
    layers = lambda n: "model.layers.%d.self_attn." % n  # noqa: E731
    # (head_dim hidden_size / num_attention_heads: the encoders')
    no_head_dim = {k: v for k, v in base.items() if k != "head_dim"}

    # Granite: the softmax scale is attention_multiplier.
    w = weights(dim, H, K, D)
    cfg = dict(base, model_type="granite", rope_theta=10000.0, attention_multiplier=0.0078125,
               embedding_multiplier=12.0, residual_multiplier=0.22, logits_scaling=8.0,
               attention_bias=False)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half", "scale": 0.0078125}
    save(out, "granite", cfg, named(w, layers(0)), x, attention(x, w, f), 0)

    # Gemma 3 (multimodal config, text_config; transformers 4 names): a
    # sliding layer (local rope) and a full one (global rope, linear x8).
    text = dict(base, model_type="gemma3_text", query_pre_attn_scalar=24, rope_theta=1e6,
                rope_local_base_freq=1e4, rope_scaling={"rope_type": "linear", "factor": 8.0},
                sliding_window=512, sliding_window_pattern=6, attn_logit_softcapping=None,
                final_logit_softcapping=None)
    cfg = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
           "text_config": text, "vision_config": {"model_type": "siglip_vision_model",
                                                  "hidden_size": 48, "num_attention_heads": 3}}
    for layer, inv in ((0, inv_freq(1e4, D)), (5, inv_freq(1e6, D) / 8.0)):
        w = weights(dim, H, K, D, norms="head")
        f = {"H": H, "K": K, "D": D, "inv": inv, "layout": "half", "scale": 24 ** -0.5,
             "eps": 1e-6, "plus_one": True}
        save(out, "gemma3_layer%d" % layer, cfg,
             named(w, "language_model.model.layers.%d.self_attn." % layer), x,
             attention(x, w, f), layer)
    # A text_config that leaves out the keys at Gemma3TextConfig's defaults
    # (query_pre_attn_scalar 256, rope_theta 1e6, rope_local_base_freq 1e4,
    # sliding_window 4096, every sixth layer full), as the releases' do.
    text = dict(base, model_type="gemma3_text", rope_scaling={"rope_type": "linear",
                                                              "factor": 8.0})
    cfg = {"model_type": "gemma3", "text_config": text}
    for layer, inv in ((4, inv_freq(1e4, D)), (11, inv_freq(1e6, D) / 8.0)):
        w = weights(dim, H, K, D, norms="head")
        f = {"H": H, "K": K, "D": D, "inv": inv, "layout": "half", "scale": 256 ** -0.5,
             "eps": 1e-6, "plus_one": True}
        save(out, "gemma3_defaults_layer%d" % layer, cfg,
             named(w, "model.language_model.layers.%d.self_attn." % layer), x,
             attention(x, w, f), layer)

    # Gemma 3 as transformers 5 saves it: rope_parameters per layer type,
    # model.language_model names, layer_types.
    text = dict(base, model_type="gemma3_text", query_pre_attn_scalar=24, sliding_window=512,
                layer_types=["sliding_attention"] * 5 + ["full_attention"],
                rope_parameters={"full_attention": {"rope_type": "linear", "factor": 8.0,
                                                    "rope_theta": 1e6},
                                 "sliding_attention": {"rope_type": "default",
                                                       "rope_theta": 1e4}})
    cfg = {"model_type": "gemma3", "text_config": text}
    for layer, inv in ((2, inv_freq(1e4, D)), (5, inv_freq(1e6, D) / 8.0)):
        w = weights(dim, H, K, D, norms="head")
        f = {"H": H, "K": K, "D": D, "inv": inv, "layout": "half", "scale": 24 ** -0.5,
             "eps": 1e-6, "plus_one": True}
        save(out, "gemma3_v5_layer%d" % layer, cfg,
             named(w, "model.language_model.layers.%d.self_attn." % layer), x,
             attention(x, w, f), layer)

    # Granite without attention_multiplier: GraniteConfig's default, 1.
    w = weights(dim, H, K, D)
    cfg = dict(base, model_type="granite", rope_theta=10000.0)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half", "scale": 1.0}
    save(out, "granite_default_multiplier", cfg, named(w, layers(0)), x, attention(x, w, f), 0)

    # OLMo 3: OLMo 2's norms; sliding layers rotate without the scaling
    # (linear x4 here) that the full layers get.
    cfg = dict(base, model_type="olmo3", rope_theta=5e5, sliding_window=4096,
               layer_types=["sliding_attention"] * 3 + ["full_attention"],
               rope_scaling={"rope_type": "linear", "factor": 4.0})
    for layer, inv in ((1, inv_freq(5e5, D)), (3, inv_freq(5e5, D) / 4.0)):
        w = weights(dim, H, K, D, norms="whole")
        f = {"H": H, "K": K, "D": D, "inv": inv, "layout": "half", "eps": 1e-6,
             "whole_norm": True}
        save(out, "olmo3_layer%d" % layer, cfg, named(w, layers(layer)), x,
             attention(x, w, f), layer)

    # OLMo 2: q/k norms over the whole projection.
    w = weights(dim, H, K, D, norms="whole")
    cfg = dict(base, model_type="olmo2", rope_theta=5e5, attention_bias=False)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(5e5, D), "layout": "half", "eps": 1e-6,
         "whole_norm": True}
    save(out, "olmo2", cfg, named(w, layers(0)), x, attention(x, w, f), 0)
    # ... without rms_norm_eps: Olmo2Config's 1e-5, not Llama's 1e-6 (q and k
    # small enough that the epsilon shows)
    w = weights(dim, H, K, D, norms="whole")
    w["q"], w["k"] = f32(w["q"] * 2 ** -8), f32(w["k"] * 2 ** -8)
    cfg = {k: v for k, v in cfg.items() if k != "rms_norm_eps"}
    save(out, "olmo2_default_eps", cfg, named(w, layers(0)), x,
         attention(x, w, dict(f, eps=1e-5)), 0)

    # SmolLM3: layer 3 of 4 runs without RoPE, layer 1 with it.
    cfg = dict(base, model_type="smollm3", rope_theta=2e6, no_rope_layers=[1, 1, 1, 0],
               no_rope_layer_interval=4, use_sliding_window=False, sliding_window=None)
    for layer in (1, 3):
        w = weights(dim, H, K, D)
        f = {"H": H, "K": K, "D": D, "inv": inv_freq(2e6, D) if layer != 3 else None,
             "layout": "half"}
        save(out, "smollm3_layer%d" % layer, cfg, named(w, layers(layer)), x,
             attention(x, w, f), layer)

    # SmolLM3 with neither key: SmolLM3Config's defaults, rope_theta 2e6 and
    # every fourth layer without RoPE.
    cfg = dict(base, model_type="smollm3")
    w = weights(dim, H, K, D)
    f = {"H": H, "K": K, "D": D, "inv": None, "layout": "half"}
    save(out, "smollm3_defaults_layer3", cfg, named(w, layers(3)), x, attention(x, w, f), 3)
    w = weights(dim, H, K, D)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(2e6, D), "layout": "half"}
    save(out, "smollm3_defaults_layer2", cfg, named(w, layers(2)), x, attention(x, w, f), 2)

    # SmolLM3 without the list: no_rope_layer_interval 4 makes layer 7 NoPE.
    cfg = dict(base, model_type="smollm3", rope_theta=2e6, no_rope_layer_interval=4)
    for layer in (6, 7):
        w = weights(dim, H, K, D)
        f = {"H": H, "K": K, "D": D, "inv": inv_freq(2e6, D) if layer != 7 else None,
             "layout": "half"}
        save(out, "smollm3_interval_layer%d" % layer, cfg, named(w, layers(layer)), x,
             attention(x, w, f), layer)

    # Cohere (Command-R): interleaved pairs under q_proj names.
    w = weights(dim, H, K, D)
    cfg = dict(base, model_type="cohere", rope_theta=8e6, use_qk_norm=False, logit_scale=0.0625,
               layer_norm_eps=1e-5, attention_bias=False)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(8e6, D), "layout": "interleaved"}
    save(out, "cohere", cfg, named(w, layers(0)), x, attention(x, w, f), 0)

    # Command-R+ (use_qk_norm): a LayerNorm of each head, its own weights.
    w = weights(dim, H, K, D, norms="heads")
    cfg = dict(base, model_type="cohere", rope_theta=75e4, use_qk_norm=True, layer_norm_eps=1e-5)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(75e4, D), "layout": "interleaved",
         "layer_norm": True, "eps": 1e-5}
    save(out, "cohere_qk_norm", cfg, named(w, layers(0)), x, attention(x, w, f), 0)

    # StableLM 2 12B (qk_layernorm): q_layernorm.norms.N, one LayerNorm per
    # head; every feature rotates here (StableLM's partial rotary:
    # tests/hf's stablelm_partial).  The same weights as Cohere's q_norm
    # [H, D] (run with --layout half) make stablelm_as_cohere: their norms'
    # gradients must be the same numbers (Cohere's rotary embedding turns all
    # of head_dim whatever partial_rotary_factor says).
    w = weights(dim, H, K, D, biases="qkv", norms="heads")
    cfg = dict(base, model_type="stablelm", rope_theta=1e4, partial_rotary_factor=1.0,
               qk_layernorm=True, use_qkv_bias=True, layer_norm_eps=1e-5)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half",
         "layer_norm": True, "eps": 1e-5}
    y = attention(x, w, f)
    tensors = named({r: a for r, a in w.items() if r not in ("qn", "kn")}, layers(0))
    for h in range(H):
        tensors[layers(0) + "q_layernorm.norms.%d.weight" % h] = w["qn"][h]
    for h in range(K):
        tensors[layers(0) + "k_layernorm.norms.%d.weight" % h] = w["kn"][h]
    save(out, "stablelm_qk_layernorm", cfg, tensors, x, y, 0)
    save(out, "stablelm_as_cohere", dict(cfg, model_type="cohere", use_qk_norm=True,
                                         qk_layernorm=None, use_qkv_bias=None,
                                         attention_bias=True),
         named(dict(w, bo=f32(np.zeros(dim))), layers(0)), x, y, 0,
         args=["--layout", "half"])  # attention_bias: o_proj's bias too (zero)
    stablelm = tensors

    # A partial_rotary_factor in rope_parameters beside a different top-level
    # one: transformers 5.23's standardize_rope_params only sets the object's
    # where it has none (setdefault), and StableLM's attention and rotary
    # embedding read the object's: a quarter of each head rotates.
    w = weights(dim, H, K, D)
    cfg = dict(base, model_type="stablelm", partial_rotary_factor=0.5,
               rope_parameters={"rope_type": "default", "rope_theta": 1e4,
                                "partial_rotary_factor": 0.25})
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D // 4), "layout": "half"}
    save(out, "two_partial_rotary_factors", cfg, named(w, layers(0)), x, attention(x, w, f), 0)

    # GLM-4: interleaved pairs over half the features, q/k/v biases.
    w = weights(dim, H, K, D, biases="qkv")
    cfg = dict(base, model_type="glm4", rope_theta=1e4, partial_rotary_factor=0.5,
               attention_bias=True)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D // 2), "layout": "interleaved"}
    save(out, "glm4", cfg, named(w, layers(0)), x, attention(x, w, f), 0)

    # GLM (the first release): as GLM-4; OLMo: Llama's attention (clip_qkv
    # null), its saved rotary_emb.inv_freq buffer ignored as transformers does.
    w = weights(dim, H, K, D, biases="qkv")
    cfg = dict(base, model_type="glm", rope_theta=1e4, partial_rotary_factor=0.5,
               attention_bias=True)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D // 2), "layout": "interleaved"}
    save(out, "glm", cfg, named(w, layers(0)), x, attention(x, w, f), 0)
    w = weights(dim, H, K, D)
    cfg = dict(base, model_type="olmo", rope_theta=1e4, clip_qkv=None, attention_bias=False)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half"}
    tensors = dict(named(w, layers(0)),
                   **{layers(0) + "rotary_emb.inv_freq": f32(np.ones(D // 2))})
    save(out, "olmo", cfg, tensors, x, attention(x, w, f), 0)
    # OLMo 7B-0424: clip_qkv clamps q, k and v after their projections.
    w = weights(dim, H, K, D)
    cfg = dict(base, model_type="olmo", rope_theta=1e4, clip_qkv=0.5, attention_bias=False)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half", "clip": 0.5}
    save(out, "olmo_clip_qkv", cfg, named(w, layers(0)), x, attention(x, w, f), 0)

    # Phi-2: dense is the output projection; biases everywhere; 40% rotary.
    # (no head_dim key: hidden_size / num_attention_heads, so dim = H D)
    w = weights(H * D, H, H, D, biases="qkvo")
    cfg = dict(base, model_type="phi", hidden_size=H * D, num_key_value_heads=H,
               rope_theta=1e4, partial_rotary_factor=0.4, qk_layernorm=False,
               layer_norm_eps=1e-5)
    del cfg["head_dim"]
    x_phi = f32(RNG.normal(0, 1, (B, S, H * D)))
    f = {"H": H, "K": H, "D": D, "inv": inv_freq(1e4, int(D * 0.4)), "layout": "half"}
    save(out, "phi", cfg, named(w, layers(0), dict(ROLES, o="dense.weight", bo="dense.bias")),
         x_phi, attention(x_phi, w, f), 0)

    # Phi-3: qkv_proj holds wq's rows, then wk's, then wv's.  The same
    # weights under Llama's names make phi3_split (their gradients must be
    # the fused one's rows).
    w = weights(dim, H, K, D)
    cfg = dict(base, model_type="phi3", rope_theta=1e4, sliding_window=2047,
               attention_bias=False)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half"}
    fused = {layers(0) + "qkv_proj.weight": np.concatenate([w["q"], w["k"], w["v"]]),
             layers(0) + "o_proj.weight": w["o"]}
    save(out, "phi3", cfg, fused, x, attention(x, w, f), 0)
    save(out, "phi3_split", dict(cfg, model_type="llama", sliding_window=None),
         named(w, layers(0)), x, attention(x, w, f), 0)
    # Phi-4-multimodal's text layers: Phi-3's attention
    save(out, "phi4_multimodal", dict(cfg, model_type="phi4_multimodal"), fused, x,
         attention(x, w, f), 0)
    # Moshi's text decoder: Llama's attention, each projection under .linear;
    # a causal mask whatever sliding_window says
    moshi = {layers(0) + p + "_proj.linear.weight": w[p] for p in "qkvo"}
    save(out, "moshi", dict(base, model_type="moshi", rope_theta=1e4, sliding_window=3000),
         moshi, x, attention(x, w, f), 0)
    # its sliding_window bounds transformers' cache only: --prefill past it refused
    save(out, "moshi_prefill_past_window", dict(base, model_type="moshi", rope_theta=1e4,
                                                sliding_window=4),
         moshi, x, None, 0, args=["--prefill", "2"], refused='masks no earlier token, while '
         "transformers' cache keeps only the last sliding_window - 1 = 3 of them")

    # GPT-J: transformer.h.N.attn names, out_proj; n_embd, n_head and
    # rotary_dim (a count: the first 8 of 16 features, interleaved, base
    # 10000); the causal-mask buffers old checkpoints saved are ignored.
    w = weights(H * D, H, H, D)
    cfg = {"model_type": "gptj", "n_embd": H * D, "n_head": H, "rotary_dim": 8,
           "n_positions": 2048, "layer_norm_epsilon": 1e-5, "attn_pdrop": 0.0}
    x_gptj = f32(RNG.normal(0, 1, (B, S, H * D)))
    f = {"H": H, "K": H, "D": D, "inv": inv_freq(1e4, 8), "layout": "interleaved"}
    p = "transformer.h.0.attn."
    tensors = dict(named(w, p, dict(ROLES, o="out_proj.weight")),
                   **{p + "bias": np.tril(np.ones((1, 1, 16, 16), dtype=bool)),
                      p + "masked_bias": f32(np.array(-1e9))})
    save(out, "gptj", cfg, tensors, x_gptj, attention(x_gptj, w, f), 0)

    # GPT-NeoX (Pythia): query_key_value packs each head's q, k, v rows
    # ([H, 3, D]), with its bias; dense; rotary_pct, rotary_emb_base.  The
    # same weights under Llama's names make gpt_neox_split (Nemotron's row:
    # its rotary embedding reads partial_rotary_factor; Llama's turns all of
    # head_dim whatever it says).
    w = weights(H * D, H, H, D, biases="qkvo")
    cfg = {"model_type": "gpt_neox", "hidden_size": H * D, "num_attention_heads": H,
           "rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 2048,
           "use_parallel_residual": True, "attention_bias": True, "layer_norm_eps": 1e-5}
    x_neox = f32(RNG.normal(0, 1, (B, S, H * D)))
    f = {"H": H, "K": H, "D": D, "inv": inv_freq(1e4, 4), "layout": "half"}
    per_head = lambda a: np.stack([a[0].reshape(H, D, -1), a[1].reshape(H, D, -1),  # noqa: E731
                                   a[2].reshape(H, D, -1)], 1).reshape(3 * H * D, -1)
    p = "gpt_neox.layers.0.attention."
    tensors = {p + "query_key_value.weight": per_head([w["q"], w["k"], w["v"]]),
               p + "query_key_value.bias": per_head([w["bq"], w["bk"], w["bv"]])[:, 0],
               p + "dense.weight": w["o"], p + "dense.bias": w["bo"],
               p + "bias": np.tril(np.ones((1, 1, 16, 16), dtype=bool)),
               p + "masked_bias": f32(np.array(-1e9)),
               p + "rotary_emb.inv_freq": f32(inv_freq(1e4, 4))}
    save(out, "gpt_neox", cfg, tensors, x_neox, attention(x_neox, w, f), 0)
    save(out, "gpt_neox_split", dict(cfg, model_type="nemotron", partial_rotary_factor=0.25,
                                     rope_theta=1e4, rotary_pct=None, rotary_emb_base=None),
         named(w, layers(0)), x_neox, attention(x_neox, w, f), 0)

    # Falcon: query_key_value packed three ways, by multi_query (FalconConfig's
    # default: true) and new_decoder_architecture; dense.  head_dim is
    # hidden_size / num_attention_heads.
    def grouped(parts, groups):
        """[groups, H/groups + 2, D] rows from q [H D], k, v [groups D] (rows
        of matrices or of bias vectors)."""
        q, k, v = (a.reshape(groups, -1, *a.shape[1:]) for a in parts)
        return np.concatenate([q, k, v], 1).reshape(-1, *parts[0].shape[1:])
    x_f = f32(RNG.normal(0, 1, (B, S, H * D)))
    base_f = {"model_type": "falcon", "hidden_size": H * D, "num_attention_heads": H,
              "rope_theta": 1e4, "alibi": False, "parallel_attn": True,
              "max_position_embeddings": 2048}
    p = "transformer.h.0.self_attention."
    for name, extra, K_f, bias in (
            ("falcon_multi_query", {}, 1, False),
            ("falcon_new_decoder", {"new_decoder_architecture": True, "num_kv_heads": 2}, 2,
             True),
            ("falcon_per_head", {"multi_query": False}, H, True)):
        w = weights(H * D, H, K_f, D, biases="qkvo" if bias else "")
        cfg = dict(base_f, bias=bias, **extra)
        if name == "falcon_multi_query":
            qkv = np.concatenate([w["q"], w["k"], w["v"]])
        else:
            qkv = grouped([w["q"], w["k"], w["v"]], K_f)
        tensors = {p + "query_key_value.weight": qkv, p + "dense.weight": w["o"]}
        if bias:
            tensors[p + "query_key_value.bias"] = grouped([w["bq"], w["bk"], w["bv"]], K_f)
            tensors[p + "dense.bias"] = w["bo"]
        f = {"H": H, "K": K_f, "D": D, "inv": inv_freq(1e4, D), "layout": "half"}
        save(out, name, cfg, tensors, x_f, attention(x_f, w, f), 0)
    falcon = tensors

    # InternLM2: wqkv grouped per key/value head; wo; dynamic NTK rope,
    # unchanged within max_position_embeddings.
    # (head_dim is hidden_size / num_attention_heads.)
    w = weights(H * D, H, K, D)
    cfg = dict(base, model_type="internlm2", hidden_size=H * D, rope_theta=1e6, bias=False,
               rope_scaling={"type": "dynamic", "factor": 2.0})
    del cfg["head_dim"]
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e6, D), "layout": "half"}
    tensors = {"model.layers.0.attention.wqkv.weight": grouped([w["q"], w["k"], w["v"]], K),
               "model.layers.0.attention.wo.weight": w["o"]}
    save(out, "internlm2", cfg, tensors, x_f, attention(x_f, w, f), 0)
    internlm2 = (cfg, tensors)

    # ChatGLM 3 / GLM-4 (remote code): multi_query_attention with 2 groups,
    # and without it (per head); q/k/v biases.  rope_ratio 50 (GLM-4's code
    # multiplies the base by it, ChatGLM2-32K's divides positions) needs
    # --theta to say which.
    p = "transformer.encoder.layers.0.self_attention."
    chatglm = {"model_type": "chatglm", "hidden_size": dim, "num_attention_heads": H,
               "kv_channels": D, "add_qkv_bias": True,
               "add_bias_linear": False, "original_rope": True, "seq_length": 8192,
               "apply_query_key_layer_scaling": True, "attention_softmax_in_fp32": True}
    for name, mqa, K_g, ratio in (("chatglm_multi_query", True, 2, 1),
                                  ("chatglm_per_head", False, H, 1),
                                  ("chatglm_rope_ratio", True, 2, 50)):
        w = weights(dim, H, K_g, D, biases="qkv")
        cfg = dict(chatglm, multi_query_attention=mqa, multi_query_group_num=2, rope_ratio=ratio)
        if mqa:
            qkv = np.concatenate([w["q"], w["k"], w["v"]])
            bqkv = np.concatenate([w["bq"], w["bk"], w["bv"]])
        else:
            qkv = grouped([w["q"], w["k"], w["v"]], H)
            bqkv = grouped([w["bq"], w["bk"], w["bv"]], H)
        tensors = {p + "query_key_value.weight": qkv, p + "query_key_value.bias": bqkv,
                   p + "dense.weight": w["o"]}
        f = {"H": H, "K": K_g, "D": D, "inv": inv_freq(1e4 * ratio, D // 2),
             "layout": "interleaved"}
        save(out, name, cfg, tensors, x, attention(x, w, f), 0,
             args=["--theta", str(1e4 * ratio)] if ratio != 1 else ())
    chatglm_tensors = tensors

    # Llama 4 Scout (multimodal config; llama3 rope with low = high factor;
    # every fourth layer NoPE by Llama4TextConfig's default interval).
    # floor_scale 4 makes the temperature move within 12 tokens.
    scout = {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
             "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}
    text = dict(base, model_type="llama4_text", rope_theta=5e5, rope_scaling=scout,
                rms_norm_eps=1e-5, use_qk_norm=True, attention_chunk_size=8192,
                attn_temperature_tuning=True, floor_scale=4, attn_scale=0.5,
                num_local_experts=16, interleave_moe_layer_step=1)
    cfg = {"model_type": "llama4", "text_config": text,
           "vision_config": {"model_type": "llama4_vision_model", "hidden_size": 48}}
    for layer in (0, 3):
        w = weights(dim, H, K, D)
        nope = layer == 3
        f = {"H": H, "K": K, "D": D, "layout": "interleaved",
             "inv": None if nope else llama3_inv_freq(5e5, D, 16.0, 1.0, 1.0, 8192),
             "l2": None if nope else 1e-5, "temperature": (4, 0.5) if nope else None}
        save(out, "llama4_layer%d" % layer, cfg,
             named(w, "language_model.model.layers.%d.self_attn." % layer), x,
             attention(x, w, f), layer)
    # Maverick-style text config alone: no rope scaling, no_rope_layers given,
    # chunks of 8 tokens (the NoPE layer 1 attends everything), the
    # defaults of Llama4TextConfig for the rest (temperature: floor_scale 8192,
    # a no-op within 12 tokens; head_dim 128 is given here).
    cfg = dict(base, model_type="llama4_text", no_rope_layers=[1, 0], attention_chunk_size=8)
    w = weights(dim, H, K, D)
    f = {"H": H, "K": K, "D": D, "layout": "interleaved", "inv": None}
    save(out, "llama4_text_nope_layer1", cfg, named(w, layers(1)), x, attention(x, w, f), 1)
    llama4_chunks = (cfg, named(w, layers(0)))
    # An empty no_rope_layers is Llama4TextConfig's default: every fourth
    # layer NoPE (layer 7 here), the rest RoPE with the L2 norm (layer 6).
    cfg = dict(base, model_type="llama4_text", no_rope_layers=[], rope_theta=5e5,
               rms_norm_eps=1e-5)
    for layer in (6, 7):
        w = weights(dim, H, K, D)
        nope = layer == 7
        f = {"H": H, "K": K, "D": D, "layout": "interleaved", "l2": None if nope else 1e-5,
             "inv": None if nope else inv_freq(5e5, D)}
        save(out, "llama4_empty_no_rope_layers_layer%d" % layer, cfg, named(w, layers(layer)),
             x, attention(x, w, f), layer)

    # Mistral 3 (text_config; rope_theta 1e9) under language_model names,
    # with --n-heads given: the text model's rope_theta still applies.
    w = weights(dim, H, K, D)
    text = dict(base, model_type="mistral", rope_theta=1e9, sliding_window=None)
    cfg = {"model_type": "mistral3", "text_config": text,
           "vision_config": {"model_type": "pixtral", "hidden_size": 48}}
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e9, D), "layout": "half"}
    save(out, "mistral3", cfg, named(w, "language_model.model.layers.0.self_attn."), x,
         attention(x, w, f), 0, args=["--n-heads", str(H)])

    # Qwen2-VL: mrope with text positions is the default rope.
    w = weights(dim, H, K, D, biases="qkv")
    cfg = dict(base, model_type="qwen2_vl", rope_theta=1e6, use_sliding_window=False,
               sliding_window=32768, max_window_layers=28,
               rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]})
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e6, D), "layout": "half"}
    save(out, "qwen2_vl", cfg, named(w, "model.language_model.layers.0.self_attn."), x,
         attention(x, w, f), 0)
    # ... and with an image: 3-D positions [3, B, S], each row its own layout
    # (2 text, a 2 x 2 x 2 grid, 2 text; 4 text, a 1 x 2 x 3 grid, 2 text).
    pos3 = np.stack([rope_index([("text", 2), ("grid", 2, 2, 2, 1), ("text", 2)]),
                     rope_index([("text", 4), ("grid", 1, 2, 3, 1), ("text", 2)])], 1)
    f = dict(f, pos3=pos3, mrope=([2, 3, 3], False))
    save(out, "qwen2_vl_image", cfg, named(w, "model.language_model.layers.0.self_attn."), x,
         attention(x, w, f), 0, positions=pos3)
    save_grads(out, "qwen2_vl_image", x, w, f)
    # Qwen2.5-VL (transformers 5's rope_parameters in text_config): a video of
    # 3 frames, temporal steps of 2, in both rows, from different offsets.
    w = weights(dim, H, K, D, biases="qkv")
    text = dict(base, model_type="qwen2_5_vl_text", use_sliding_window=False,
                rope_parameters={"rope_type": "default", "rope_theta": 1e6,
                                 "mrope_section": [4, 2, 2]})
    cfg = {"model_type": "qwen2_5_vl", "text_config": text,
           "vision_config": {"model_type": "qwen2_5_vl", "tokens_per_second": 2}}
    pos3 = np.stack([rope_index([("text", 1), ("grid", 3, 1, 3, 2), ("text", 2)]),
                     rope_index([("text", 3), ("grid", 3, 1, 2, 2), ("text", 3)])], 1)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e6, D), "layout": "half", "pos3": pos3,
         "mrope": ([4, 2, 2], False)}
    save(out, "qwen2_5_vl_video", cfg, named(w, "model.language_model.layers.0.self_attn."), x,
         attention(x, w, f), 0, positions=pos3)
    save_grads(out, "qwen2_5_vl_video", x, w, f)
    # Qwen3-VL: interleaved sections, q/k norms, no biases; one image in each
    # row, the same positions for both rows given as [3, S].
    w = weights(dim, H, K, D, norms="head")
    text = dict(base, model_type="qwen3_vl_text", rope_theta=5e6, attention_bias=False,
                rope_scaling={"rope_type": "default", "mrope_section": [3, 3, 2],
                              "mrope_interleaved": True})
    cfg = {"model_type": "qwen3_vl", "text_config": text,
           "vision_config": {"model_type": "qwen3_vl", "depth": 2}}
    one = rope_index([("text", 3), ("grid", 1, 2, 3, 1), ("text", 3)])
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(5e6, D), "layout": "half", "eps": 1e-6,
         "pos3": np.stack([one, one], 1), "mrope": ([3, 3, 2], True)}
    save(out, "qwen3_vl_image", cfg, named(w, "model.language_model.layers.0.self_attn."), x,
         attention(x, w, f), 0, positions=one)
    save_grads(out, "qwen3_vl_image", x, w, f)

    # ---- masks: windows, soft-capping, sinks, chunks, beyond 12 tokens ----
    # Mistral v0.1: every layer slides (sliding_window 5 < 12 tokens).
    w = weights(dim, H, K, D)
    cfg = dict(base, model_type="mistral", rope_theta=1e4, sliding_window=5)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half", "window": 5}
    save(out, "mistral_window", cfg, named(w, layers(0)), x, attention(x, w, f), 0)
    # Qwen2 with use_sliding_window: layers from max_window_layers on slide.
    cfg = dict(base, model_type="qwen2", rope_theta=1e6, use_sliding_window=True,
               sliding_window=4, max_window_layers=1)
    for layer in (0, 1):
        w = weights(dim, H, K, D, biases="qkv")
        f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e6, D), "layout": "half",
             "window": 4 if layer else None}
        save(out, "qwen2_window_layer%d" % layer, cfg, named(w, layers(layer)), x,
             attention(x, w, f), layer)
    # Qwen2-MoE with use_sliding_window: the even layers below
    # max_window_layers slide (Qwen2MoeConfig's layer_types default).
    cfg = dict(base, model_type="qwen2_moe", rope_theta=1e6, use_sliding_window=True,
               sliding_window=4, max_window_layers=3)
    for layer in (0, 1, 4):
        w = weights(dim, H, K, D, biases="qkv")
        f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e6, D), "layout": "half",
             "window": 4 if layer == 0 else None}
        save(out, "qwen2_moe_window_layer%d" % layer, cfg, named(w, layers(layer)), x,
             attention(x, w, f), layer)
    # Qwen3-MoE with use_sliding_window: every layer (max_window_layers unread).
    w = weights(dim, H, K, D, norms="head")
    cfg = dict(base, model_type="qwen3_moe", rope_theta=1e6, use_sliding_window=True,
               sliding_window=4, max_window_layers=48)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e6, D), "layout": "half", "eps": 1e-6,
         "window": 4}
    save(out, "qwen3_moe_window", cfg, named(w, layers(0)), x, attention(x, w, f), 0)
    # SmolLM3 with use_sliding_window: the layers without RoPE slide.
    cfg = dict(base, model_type="smollm3", rope_theta=2e6, no_rope_layers=[1, 1, 1, 0],
               use_sliding_window=True, sliding_window=4)
    for layer in (1, 3):
        w = weights(dim, H, K, D)
        f = {"H": H, "K": K, "D": D, "inv": inv_freq(2e6, D) if layer != 3 else None,
             "layout": "half", "window": 4 if layer == 3 else None}
        save(out, "smollm3_window_layer%d" % layer, cfg, named(w, layers(layer)), x,
             attention(x, w, f), layer)
    # Mixtral reads no layer_types (every layer slides): one that disagrees
    # is refused; Qwen2's layer_types with use_sliding_window off has no
    # window to give (transformers sets sliding_window to None).
    w = weights(dim, H, K, D)
    save(out, "mixtral_layer_types", dict(base, model_type="mixtral", sliding_window=4,
                                          layer_types=["sliding_attention", "full_attention"]),
         named(w, layers(1)), x, None, 1,
         refused='disagrees with model_type "mixtral" on layer 1')
    save(out, "qwen2_layer_types_gate_off", dict(base, model_type="qwen2", sliding_window=4,
                                                 layer_types=["sliding_attention"]),
         named(weights(dim, H, K, D, biases="qkv"), layers(0)), x, None, 0,
         refused='"use_sliding_window" is false')
    # Gemma 2: scale query_pre_attn_scalar^-1/2, logits soft-capped (a cap
    # of 1 bites at these sizes), even layers sliding (Gemma2Config's
    # layer_types default, here without layer_types), odd ones full.
    cfg = dict(base, model_type="gemma2", rope_theta=1e4, query_pre_attn_scalar=16,
               attn_logit_softcapping=1.0, final_logit_softcapping=30.0, sliding_window=5,
               sliding_window_size=5, cache_implementation="hybrid")
    for layer in (0, 1):
        w = weights(dim, H, K, D)
        f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half",
             "scale": 0.25, "softcap": 1.0, "window": None if layer else 5}
        save(out, "gemma2_layer%d" % layer, cfg, named(w, layers(layer)), x,
             attention(x, w, f), layer)
        if layer == 0:
            save_grads(out, "gemma2_layer0", x, w, f)
    # Gemma 3 beyond its window: a sliding layer (local rope, window 5).
    text = dict(base, model_type="gemma3_text", query_pre_attn_scalar=24, rope_theta=1e6,
                rope_local_base_freq=1e4, sliding_window=5, sliding_window_pattern=6)
    w = weights(dim, H, K, D, norms="head")
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half", "scale": 24 ** -0.5,
         "eps": 1e-6, "plus_one": True, "window": 5}
    save(out, "gemma3_window_layer0", text, named(w, layers(0)), x, attention(x, w, f), 0)
    # A Gemma 2 config at Gemma2Config's defaults (cap 50, window 4096).
    w = weights(dim, H, K, D)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half",
         "scale": 256 ** -0.5, "softcap": 50.0}
    save(out, "gemma2_defaults", dict(base, model_type="gemma2", rope_theta=1e4),
         named(w, layers(0)), x, attention(x, w, f), 0)
    # gpt-oss: sinks in every layer, q/k/v/o biases, layer_types alternating
    # sliding (window 4) and full; no rope keys: GptOssConfig's yarn (factor
    # 32 over 4096 positions, truncate false) at rope_theta 150000, given
    # here, and left out in gpt_oss_default_theta.
    cfg = dict(base, model_type="gpt_oss", rope_theta=150000.0, sliding_window=4,
               attention_bias=True, layer_types=["sliding_attention", "full_attention"],
               num_local_experts=4, num_experts_per_tok=2)
    inv, att = yarn_inv_freq(150000.0, D, 32.0, 4096, truncate=False)
    for layer in (0, 1):
        w = weights(dim, H, K, D, biases="qkvo")
        w["sinks"] = f32(RNG.normal(0, 1, H))
        f = {"H": H, "K": K, "D": D, "inv": inv, "att": att, "layout": "half",
             "window": None if layer else 4}
        save(out, "gpt_oss_layer%d" % layer, cfg, named(w, layers(layer)), x,
             attention(x, w, f), layer)
        save_grads(out, "gpt_oss_layer%d" % layer, x, w, f, ("sinks",))
    cfg = {k: v for k, v in cfg.items() if k != "rope_theta"}
    save(out, "gpt_oss_default_theta", cfg, named(w, layers(1)), x, attention(x, w, f), 1)

    # Defaults of the families' config classes for a config that leaves
    # rope_theta out: MixtralConfig's 1e6.
    w = weights(dim, H, K, D)
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e6, D), "layout": "half"}
    save(out, "mixtral_default_theta", dict(base, model_type="mixtral"), named(w, layers(0)),
         x, attention(x, w, f), 0)
    # Phi3Config reads rope type "yarn" as longrope: short_factor below the
    # original length (max_position_embeddings / original 1: no attention
    # factor).
    short = [1.0, 1.5, 2.0, 3.0, 1.25, 1.0, 4.0, 2.5]
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D) / np.array(short), "layout": "half"}
    fused = {layers(0) + "qkv_proj.weight": np.concatenate([w["q"], w["k"], w["v"]]),
             layers(0) + "o_proj.weight": w["o"]}
    save(out, "phi3_yarn_type", dict(base, model_type="phi3", rope_theta=1e4,
                                     original_max_position_embeddings=4096, rope_scaling={
                                         "type": "yarn", "short_factor": short,
                                         "long_factor": [8.0] * 8}),
         fused, x, attention(x, w, f), 0)
    # Llama 4's RoPE layer 0 of the Maverick-style config: chunks of 8.
    w = weights(dim, H, K, D)
    f = {"H": H, "K": K, "D": D, "layout": "interleaved", "inv": inv_freq(5e5, D),
         "l2": 1e-5, "chunk": 8}
    save(out, "llama4_chunks_layer0", llama4_chunks[0], named(w, layers(0)), x,
         attention(x, w, f), 0)
    save_grads(out, "llama4_chunks_layer0", x, w, f)
    # From position 8 the rope moves, not the chunks (they follow the
    # tokens' places, as transformers' cache_position).
    f = dict(f, start=8)
    save(out, "llama4_chunks_start_pos", llama4_chunks[0], named(w, layers(0)), x,
         attention(x, w, f), 0, args=["--start-pos", "8"])

    # Ministral 3 without rope keys: Ministral3Config's yarn (factor 16 over
    # 16384 positions, rope_theta 1e6, mscale = mscale_all_dim: attention
    # factor 1) and llama_4_scaling_beta 0.1: q times 1 + 0.1 log 2 from
    # position 16384 on (positions 16378 .. 16389 here)
    w = weights(dim, H, K, D)
    inv, _ = yarn_inv_freq(1e6, D, 16.0, 16384)
    f = {"H": H, "K": K, "D": D, "inv": inv, "layout": "half", "start": 16378,
         "q_scaling": (0.1, 16384)}
    save(out, "ministral3_default_rope", dict(base, model_type="ministral3"),
         named(w, layers(0)), x, attention(x, w, f), 0, args=["--start-pos", "16378"])

    # Biases where the family's modeling code builds them, by its key's
    # default: Starcoder2 (use_bias, on), Qwen2-MoE (qkv_bias, on: q, k, v);
    # Llama with attention_bias true.
    f = {"H": H, "K": K, "D": D, "inv": inv_freq(1e4, D), "layout": "half"}
    for name, cfg, biases in (
            ("starcoder2_use_bias_default", dict(base, model_type="starcoder2",
                                                 sliding_window=4096), "qkvo"),
            ("qwen2_moe_qkv_bias_default", dict(base, model_type="qwen2_moe"), "qkv"),
            ("llama_attention_bias", dict(base, model_type="llama", attention_bias=True),
             "qkvo")):
        w = weights(dim, H, K, D, biases=biases)
        save(out, name, dict(cfg, rope_theta=1e4), named(w, layers(0)), x, attention(x, w, f),
             0)

    # ---- refused: each would run wrong if its key or tensor were ignored ----
    w = weights(dim, H, K, D)
    plain = named(w, layers(0))
    w_bias = weights(dim, H, K, D, biases="qkvo")
    bias = lambda *r: {layers(0) + ROLES["b" + p]: w_bias["b" + p] for p in r}  # noqa: E731
    meta = {"layers.0.attention.w%s.weight" % p: w[p] for p in "qkvo"}
    qwen2_vl = dict(plain, **bias("q", "k", "v"))  # q/k/v biases always
    qk_norms = {layers(0) + n: f32(np.ones(D)) for n in ("q_norm.weight", "k_norm.weight")}
    lfm3 = dict(base, model_type="lfm3", layer_types=["full_attention"], rope_parameters={
        t: {"rope_type": "default", "rope_theta": 1e4}
        for t in ("full_attention", "sliding_attention")})
    mha = {k: v for k, v in base.items() if k not in ("head_dim", "num_key_value_heads")}
    pd = dim // H  # Persimmon: query_key_value [H, 3, pd], dense, biased; q/k LayerNorms
    persimmon = {layers(0) + n: f32(RNG.normal(0, 0.3, s)) for n, s in (
        ("query_key_value.weight", (3 * dim, dim)), ("query_key_value.bias", (3 * dim,)),
        ("dense.weight", (dim, dim)), ("dense.bias", (dim,)), ("q_layernorm.weight", (pd,)),
        ("q_layernorm.bias", (pd,)), ("k_layernorm.weight", (pd,)), ("k_layernorm.bias", (pd,)))}
    phi3_fused = {layers(0) + "qkv_proj.weight": np.concatenate([w[p] for p in "qkv"]),
                  layers(0) + "o_proj.weight": w["o"],
                  layers(0) + "qkv_proj.bias": np.concatenate([w_bias["b" + p] for p in "qkv"])}
    refusals = [
        # a bias the family's model does not build (transformers would not
        # load it), or one it builds that the checkpoint lacks
        ("llama_stray_k_bias", dict(base, model_type="llama"), dict(plain, **bias("k")),
         'model_type "llama" builds it without a bias unless "attention_bias" is true'),
        ("llama_attention_bias_false", dict(base, model_type="llama", attention_bias=False),
         dict(plain, **bias("q", "k", "v", "o")), "q_proj.bias' in"),
        ("mistral_stray_o_bias", dict(base, model_type="mistral"), dict(plain, **bias("o")),
         'model_type "mistral" builds it without a bias whatever the config says'),
        ("mistral_attention_bias_ignored", dict(base, model_type="mistral", attention_bias=True),
         dict(plain, **bias("k")), "k_proj.bias' in"),
        ("qwen2_stray_o_bias", dict(base, model_type="qwen2"),
         dict(plain, **bias("q", "k", "v", "o")),
         "o_proj.bias' in"),
        ("qwen2_without_qkv_bias", dict(base, model_type="qwen2"), plain,
         "has no 'model.layers.0.self_attn.q_proj.bias' beside"),
        ("phi3_stray_qkv_bias", dict(base, model_type="phi3"), phi3_fused,
         'model_type "phi3" builds it without a bias whatever the config says'),
        # Phi-3's model reads its fused qkv_proj alone (Llama's names would be
        # left out, and qkv_proj initialized)
        ("phi3_llama_names", dict(base, model_type="phi3"), plain,
         'names of model_type "phi3" (model.layers.0.self_attn.qkv_proj.weight .. '
         "model.layers.0.self_attn.o_proj.weight (layer 0's)), but a layer's under the common "
         "names (Meta's or Hugging Face's)"),
        ("gemma2_stray_k_bias", dict(base, model_type="gemma2"), dict(plain, **bias("k")),
         'model_type "gemma2" builds it without a bias unless "attention_bias" is true'),
        ("granite_stray_o_bias", dict(base, model_type="granite"), dict(plain, **bias("o")),
         "o_proj.bias' in"),
        ("stablelm_stray_qkv_bias", dict(base, model_type="stablelm"),
         dict(plain, **bias("q", "k", "v")), 'unless "use_qkv_bias" is true'),
        ("stablelm_stray_o_bias", dict(base, model_type="stablelm", use_qkv_bias=True),
         dict(plain, **bias("q", "k", "v", "o")), "o_proj.bias' in"),
        ("starcoder2_without_bias", dict(base, model_type="starcoder2"), plain,
         'builds it with a bias while "use_bias" is true'),
        ("starcoder2_use_bias_string", dict(base, model_type="starcoder2", use_bias="yes"),
         plain, '"use_bias" must be true or false'),
        ("gpt_oss_without_bias", dict(base, model_type="gpt_oss"),
         dict(plain, **{layers(0) + "sinks": f32(RNG.normal(0, 1, H))}),
         "has no 'model.layers.0.self_attn.q_proj.bias' beside"),
        ("internlm2_bias_default", {k: v for k, v in internlm2[0].items() if k != "bias"},
         internlm2[1], "has no 'model.layers.0.attention.wqkv.bias' beside"),
        # two naming schemes for one layer's attention
        ("two_naming_schemes", dict(base, model_type="llama"), dict(plain, **meta),
         "holds two sets of attention weights, named as 'layers.0.attention.wq.weight' and "
         "as 'model.layers.0.self_attn.q_proj.weight'"),
        ("mistral3_two_prefixes", {"model_type": "mistral3",
                                   "text_config": dict(base, model_type="mistral")},
         dict(plain, **named(w, "model.language_model.layers.0.self_attn.")),
         "holds two sets of attention weights, named as 'model.layers.0.self_attn.q_proj."
         "weight' and as 'model.language_model.layers.0.self_attn.q_proj.weight'"),
        ("gpt_oss_without_sinks", dict(base, model_type="gpt_oss", attention_bias=False), plain,
         "has no sinks beside"),
        ("sinks_tensor", dict(base, model_type="llama"),
         dict(plain, **{layers(0) + "sinks": f32(RNG.normal(0, 1, H))}),
         "tensor 'model.layers.0.self_attn.sinks'"),
        ("clip_qkv_outside_olmo", dict(base, model_type="llama", clip_qkv=8.0), plain,
         '"clip_qkv"'),
        ("stablelm_stray_norms", dict(base, model_type="stablelm", partial_rotary_factor=0.25),
         dict(plain, **{layers(0) + "q_layernorm.norms.0.weight": f32(np.ones(D))}),
         "tensor 'model.layers.0.self_attn.q_layernorm.norms.0.weight'"),
        ("unknown_family", dict(base, model_type="my_llama"), plain,
         'model_type "my_llama" is not a family ropeattn knows'),
        ("llama_with_qk_norms", dict(base, model_type="llama"),
         dict(plain, **{layers(0) + "q_norm.weight": f32(np.ones(D)),
                        layers(0) + "k_norm.weight": f32(np.ones(D))}),
         'model_type "llama" reads no such q/k norm'),
        ("cohere_norms_without_use_qk_norm",
         dict(base, model_type="cohere", rope_theta=8e6, use_qk_norm=False),
         dict(plain, **{layers(0) + "q_norm.weight": f32(np.ones((H, D))),
                        layers(0) + "k_norm.weight": f32(np.ones((K, D)))}),
         "tensor 'model.layers.0.self_attn.q_norm.weight'"),
        ("cohere_use_qk_norm_without_norms",
         dict(base, model_type="cohere", rope_theta=8e6, use_qk_norm=True),
         plain, 'has no q_norm.weight beside'),
        ("cohere_head_dim_norm",
         dict(base, model_type="cohere", rope_theta=8e6, use_qk_norm=True),
         dict(plain, **{layers(0) + "q_norm.weight": f32(np.ones(D)),
                        layers(0) + "k_norm.weight": f32(np.ones(D))}),
         "is not [4, 16] (a LayerNorm of each head"),
        ("stablelm_head_norm_missing", dict(base, model_type="stablelm", qk_layernorm=True,
                                            use_qkv_bias=True),
         {n: a for n, a in stablelm.items() if not n.endswith("q_layernorm.norms.3.weight")},
         "has 3 of the q_layernorm.norms.N.weight"),
        ("stablelm_head_norm_gap", dict(base, model_type="stablelm", qk_layernorm=True,
                                        use_qkv_bias=True),
         {n: a for n, a in stablelm.items() if not n.endswith("q_layernorm.norms.1.weight")},
         "tensor 'model.layers.0.self_attn.q_layernorm.norms.2.weight'"),
        ("phi_qk_layernorm", dict(base, model_type="phi", qk_layernorm=True), plain,
         '"qk_layernorm"'),
        # an output gate from a projection of its own (gate_proj): where the
        # family has none, missing where it has, and Beam's bias per head
        ("afmoe_without_gate_proj", dict(base, model_type="afmoe", rope_theta=1e4,
                                         sliding_window=4, layer_types=["sliding_attention"]),
         dict(plain, **qk_norms), "has no gate_proj.weight beside"),
        ("llama_stray_gate_proj", dict(base, model_type="llama", rope_theta=1e4),
         dict(plain, **{layers(0) + "gate_proj.weight": w["q"]}),
         'model_type "llama" has no output gate of its own'),
        # MiMo-V2-Flash: value heads larger than q's and k's (padding makes
        # them no smaller), one rope object (its rotary embedding reads
        # rope_parameters by layer type), a layer type's rope without
        # partial_rotary_factor; v_head_dim where no family reads it
        ("mimo_v2_flash_v_head_dim_beyond", dict(base, model_type="mimo_v2_flash",
                                                 layer_types=["full_attention"],
                                                 v_head_dim=2 * D), plain,
         "v_head_dim 32 with head_dim 16: not supported"),
        ("mimo_v2_flash_one_rope", dict(base, model_type="mimo_v2_flash",
                                        layer_types=["full_attention"], v_head_dim=D,
                                        rope_parameters={"rope_type": "default",
                                                         "rope_theta": 1e4}), plain,
         "reads rope_parameters by layer type (full_attention, sliding_attention)"),
        ("mimo_v2_flash_rope_without_partial", dict(
            base, model_type="mimo_v2_flash", layer_types=["full_attention"], v_head_dim=D,
            rope_parameters={t: {"rope_type": "default", "rope_theta": 1e4} for t in (
                "full_attention", "sliding_attention")}), plain,
         '"rope_parameters.full_attention" has no "partial_rotary_factor"'),
        ("llama_v_head_dim", dict(base, model_type="llama", v_head_dim=8), plain,
         '"v_head_dim" (a value head size other than head_dim) changes attention'),
        # Persimmon: rope_theta's default changed in transformers 5; its q/k
        # LayerNorms have biases
        ("persimmon_without_rope_theta", dict(mha, model_type="persimmon"), persimmon,
         "default is 25000 in transformers 4.57, 10000 in 5"),
        ("persimmon_without_k_layernorm_bias", dict(mha, model_type="persimmon",
                                                    rope_theta=1e4),
         {n: a for n, a in persimmon.items() if not n.endswith("k_layernorm.bias")},
         "has no k_layernorm.bias beside"),
        # attention layers in several stacks of their own sizes
        ("blt", dict(base, model_type="blt"), plain,
         'model_type "blt" is refused: its attention layers sit in four stacks of their own '
         'sizes'),
        # a window rule the config class derives by a formula of its own
        ("flint_without_layer_types", dict(base, model_type="flint"),
         dict(plain, **{layers(0) + n: f32(np.ones(D)) for n in ("q_norm.weight",
                                                                 "k_norm.weight")},
              **{layers(0) + "sinks": f32(RNG.normal(0, 1, H))}),
         'the config has no "layer_types": model_type "flint"'),
        # a rope base per layer
        ("granite_swa_layer_rope_theta", dict(base, model_type="granite_swa",
                                              layer_types=["full_attention"],
                                              rope_theta=1e4, layer_rope_theta=[0]), plain,
         '"layer_rope_theta" gives a layer a rope base other than rope_theta'),
        # sinks under Flint's name, in a family whose transformers code does not rename it
        ("gpt_oss_softmax_offset", dict(base, model_type="gpt_oss", attention_bias=False),
         dict(plain, **{layers(0) + "softmax_offset": f32(RNG.normal(0, 1, H))}),
         'model_type "gpt_oss" reads its sinks from a tensor named sinks'),
        ("llama_attention_multiplier", dict(base, model_type="llama", attention_multiplier=0.1),
         plain, '"attention_multiplier"'),
        ("chunked_attention", dict(base, model_type="llama", attention_chunk_size=8), plain,
         '"attention_chunk_size"'),
        ("llama4_chunked_layer_type", dict(base, model_type="llama", layer_types=[
            "chunked_attention"]), plain, 'disagrees with model_type "llama" on layer 0'),
        ("gemma2_pattern_null", dict(base, model_type="gemma2", sliding_window=4,
                                     sliding_window_pattern=None), plain,
         '"sliding_window_pattern" is null'),
        ("qwen3_without_norms", dict(base, model_type="qwen3"), plain,
         "has no q_norm.weight beside 'model.layers.0.self_attn.q_proj.weight'"),
        ("gptj_rope_theta", {"model_type": "gptj", "n_embd": dim, "n_head": H,
                             "rope_theta": 5e5, "rotary_dim": 8},
         {"transformer.h.0.attn." + n: a for n, a in (
             ("q_proj.weight", w["q"]), ("k_proj.weight", w["k"]), ("v_proj.weight", w["v"]),
             ("out_proj.weight", w["o"]))}, '"rope_theta" is set'),
        ("falcon_alibi", dict(base_f, alibi=True), falcon, '"alibi"'),
        ("falcon_names_llama_config", dict(base_f, model_type="llama"), falcon,
         'holds no attention weights under the names of model_type "llama" (wq.weight .. '
         'wo.weight (Meta\'s LLaMA code) or q_proj.weight .. o_proj.weight (Hugging Face), '
         'optionally under model.layers.N.self_attn.), but a layer\'s under model_type "falcon"\'s'),
        ("chatglm_rope_ratio_without_theta", dict(chatglm, rope_ratio=500,
                                                  multi_query_attention=True,
                                                  multi_query_group_num=2), chatglm_tensors,
         "has rope_ratio 500"),
        ("chatglm_prefix", dict(chatglm, pre_seq_len=128), chatglm_tensors, '"pre_seq_len"'),
        ("llama4_floor_scale_null", dict(base, model_type="llama4_text", no_rope_layers=[0],
                                         floor_scale=None), plain, "floor_scale is null"),
        ("chatglm_original_rope_false", dict(chatglm, original_rope=False), chatglm_tensors,
         '"original_rope" is false'),
        ("chatglm_rope_theta", dict(chatglm, rope_theta=1e4), chatglm_tensors,
         '"rope_theta" is set'),
        ("chatglm_2d_positions", dict(chatglm, position_encoding_2d=True), chatglm_tensors,
         '"position_encoding_2d"'),
        ("falcon_num_key_value_heads", dict(base_f, num_key_value_heads=1), falcon,
         "reads num_kv_heads, not num_key_value_heads"),
        ("baichuan", dict(base, model_type="baichuan"), plain, 'model_type "baichuan" is refused'),
        ("mrope_outside_qwen_vl", dict(base, model_type="llama",
                                       rope_scaling={"type": "mrope", "mrope_section": [2, 3, 3]}),
         plain, 'rope type "mrope"'),
        ("mrope_section_outside_qwen_vl",
         dict(base, model_type="qwen2", rope_scaling={"rope_type": "default",
                                                      "mrope_section": [2, 3, 3]}),
         plain, '"mrope_section" (3-D multimodal positions) is supported for the Qwen-VL'),
        ("mrope_section_sum", dict(base, model_type="qwen2_vl", rope_scaling={
            "type": "mrope", "mrope_section": [2, 3, 4]}), qwen2_vl,
         '"mrope_section" [2, 3, 4] sums to 9; rotary_dim 16 needs 8'),
        ("mrope_section_length", dict(base, model_type="qwen2_vl", rope_scaling={
            "type": "mrope", "mrope_section": [4, 4]}), qwen2_vl,
         '"rope_scaling.mrope_section" must be an array of 3 integers >= 0'),
        ("mrope_section_negative", dict(base, model_type="qwen2_vl", rope_scaling={
            "type": "mrope", "mrope_section": [10, -1, -1]}), qwen2_vl,
         '"rope_scaling.mrope_section" must be an array of 3 integers >= 0'),
        ("mrope_without_section", dict(base, model_type="qwen2_vl",
                                       rope_scaling={"type": "mrope"}), qwen2_vl,
         'rope type "mrope" needs "mrope_section"'),
        ("qwen2_vl_mrope_interleaved", dict(base, model_type="qwen2_vl", rope_scaling={
            "type": "mrope", "mrope_section": [2, 3, 3], "mrope_interleaved": True}), qwen2_vl,
         '"mrope_interleaved" is true, and model_type "qwen2_vl"'),
        # Phi3Config raises on rope types but default and longrope (su, yarn)
        ("phi3_linear_type", dict(base, model_type="phi3", rope_scaling={
            "type": "linear", "factor": 2.0}), plain,
         '"rope_scaling.rope_type" is "linear": model_type "phi3" runs the default rope or '
         'longrope'),
        # transformers 5 replaces the rope object's original with the top
        # level's (Phi3Config's 4096 when the key is absent): refused when
        # they differ
        ("phi3_original_in_rope", dict(base, model_type="phi3", rope_scaling={
            "rope_type": "longrope", "short_factor": [1.0] * 8, "long_factor": [2.0] * 8,
            "original_max_position_embeddings": 16}), plain,
         '"rope_scaling.original_max_position_embeddings" is 16 and the top level\'s 4096 '
         '(model_type "phi3"\'s default)'),
        ("llama_two_originals", dict(base, model_type="llama", original_max_position_embeddings=64,
                                     rope_scaling={"rope_type": "yarn", "factor": 4.0,
                                                   "original_max_position_embeddings": 32}),
         plain, 'is 32 and the top level\'s 64: transformers 5 takes the top level\'s for rope '
         'type yarn'),
        # an explicit null is not the default: transformers sets it into the rope, which
        # has no rope_theta of its own, and fails on it
        ("gemma3_rope_theta_null", dict(base, model_type="gemma3_text", rope_theta=None), plain,
         '"rope_theta" is null and the rope has no rope_theta of its own'),
        ("gemma3_query_pre_attn_scalar_null", {"model_type": "gemma3", "text_config": dict(
            base, model_type="gemma3_text", query_pre_attn_scalar=None)}, plain,
         '"query_pre_attn_scalar" is null'),
        # an alias beside its field, differing: releases disagree on the winner
        ("gpt_neox_rotary_pct_and_factor", dict(base, model_type="gpt_neox", rotary_pct=0.25,
                                                partial_rotary_factor=0.5), plain,
         '"partial_rotary_factor" and "rotary_pct" (another name for it) are both set and '
         'differ'),
        ("gpt_neox_rotary_emb_base_and_theta", dict(base, model_type="gpt_neox",
                                                    rotary_emb_base=1e4, rope_theta=5e5), plain,
         '"rope_theta" and "rotary_emb_base"'),
        # a factor without a type: transformers runs the default rope
        ("rope_factor_without_type", dict(base, model_type="llama", rope_scaling={"factor": 2.0}),
         plain, '"rope_scaling.factor" is set without "rope_scaling.rope_type" (or '
         '"rope_scaling.type"): transformers would run the default rope and ignore it'),
        # Llama 4's chunked layer with attention_chunk_size null: transformers
        # fails building the chunked mask
        ("llama4_chunk_size_null", dict(base, model_type="llama4_text", attention_chunk_size=None),
         plain, 'layer 0 is chunked and attention_chunk_size is null'),
        # Gemma 3 with both: its config class merges rope_scaling into
        # rope_parameters' full_attention rope
        ("gemma3_rope_scaling_and_parameters", dict(
            base, model_type="gemma3_text", rope_scaling={"rope_type": "linear", "factor": 8.0},
            rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 5000.0},
                             "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}),
         plain, 'both "rope_scaling" and "rope_parameters": model_type "gemma3_text" merges'),
        # OLMo 3's rope_theta default: 10000 in transformers 4.57, 500000 in 5
        ("olmo3_without_rope_theta", dict(base, model_type="olmo3"), plain,
         'no "rope_theta": model_type "olmo3"\'s default is 10000 in transformers 4.57, 500000 '
         'in 5'),
        # issue 41's families whose attention needs what the library lacks
        # Ministral 3's q scaling: transformers fails on a rope without
        # llama_4_scaling_beta, or without original_max_position_embeddings
        # (given to llama3, yarn and longrope only, from the top level there)
        ("ministral3_without_beta", dict(base, model_type="ministral3", rope_parameters={
            "rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 16}),
         plain, 'the rope parameters (type yarn) lack llama_4_scaling_beta'),
        ("ministral3_default_without_original", dict(
            base, model_type="ministral3", rope_parameters={
                "rope_type": "default", "llama_4_scaling_beta": 0.1}),
         plain, 'the rope parameters (type default) lack original_max_position_embeddings'),
        ("ministral3_default_top_level_original", dict(
            base, model_type="ministral3", original_max_position_embeddings=16,
            rope_parameters={"rope_type": "default", "llama_4_scaling_beta": 0.1}),
         plain, '"original_max_position_embeddings" at the top level, which transformers '
         'moves into the rope parameters of llama3, yarn and longrope only'),
        # ModernBERT's decoder: its window is local_attention // 2 (a
        # sliding_window beside it that differs, or none: refused), its ropes
        # per layer type (rope_scaling merged into both, one rope for both,
        # partial_rotary_factor: not read), layer_types derived by a formula
        ("modernbert_decoder_window_contradicts", dict(
            base, model_type="modernbert-decoder", local_attention=16, sliding_window=4,
            layer_types=["sliding_attention"]), plain,
         '"sliding_window" is 4 and "local_attention" 16: model_type "modernbert-decoder" sets '
         'the window to local_attention // 2'),
        ("modernbert_decoder_local_attention_null", dict(
            base, model_type="modernbert-decoder", local_attention=None,
            layer_types=["sliding_attention"]), plain,
         '"local_attention" is null: model_type "modernbert-decoder"\'s sliding layers would '
         'see no key'),
        ("modernbert_decoder_rope_scaling", dict(
            base, model_type="modernbert-decoder", layer_types=["sliding_attention"],
            rope_scaling={"rope_type": "linear", "factor": 2.0}), plain,
         'rope_scaling: model_type "modernbert-decoder" merges it into both layer types\' '
         'ropes'),
        ("modernbert_decoder_one_rope", dict(
            base, model_type="modernbert-decoder", layer_types=["sliding_attention"],
            rope_parameters={"rope_type": "default", "rope_theta": 1e4}), plain,
         'rope_parameters of one rope: model_type "modernbert-decoder" reads one per layer '
         'type'),
        ("modernbert_decoder_partial", dict(
            base, model_type="modernbert-decoder", layer_types=["sliding_attention"],
            partial_rotary_factor=0.5), plain,
         '"partial_rotary_factor" is set, and model_type "modernbert-decoder" rotates all of '
         'head_dim'),
        ("llama_local_attention", dict(base, model_type="llama", local_attention=128), plain,
         '"local_attention"'),
        # the encoders (issue 43): ESM's absolute position embeddings (its
        # default), rotary_value outside RoFormer, RoFormer's fixed rope, ModernBERT's
        # global_attn_every_n_layers (transformers divides by it)
        ("esm_absolute", dict(no_head_dim, model_type="esm", position_embedding_type="absolute"),
         plain, '"position_embedding_type" (positions without RoPE) changes attention and is '
         'not supported for model_type "esm"'),
        ("esm_without_position_embedding_type", dict(no_head_dim, model_type="esm"), plain,
         '"position_embedding_type" is absent: model_type "esm" then adds learned absolute '
         'position embeddings'),
        ("llama_rotary_value", dict(base, model_type="llama", rotary_value=True), plain,
         '"rotary_value" (RoPE on the values too (RoFormer\'s)) changes attention and is not '
         'supported for model_type "llama"'),
        ("roformer_rope_theta", dict(no_head_dim, model_type="roformer", rope_theta=1e4), plain,
         '"rope_theta" is set, and model_type "roformer" has a fixed rope'),
        ("modernbert_every_0_layers", dict(no_head_dim, model_type="modernbert",
                                           global_attn_every_n_layers=0), plain,
         '"global_attn_every_n_layers" must be a positive integer'),
        # Phi-3.5-MoE scales by short_mscale / long_mscale: longrope only, with both
        ("phimoe_yarn", dict(base, model_type="phimoe", rope_parameters={
            "rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4, "short_mscale": 1.0,
            "long_mscale": 1.2}), plain, 'model_type "phimoe" scales it by short_mscale'),
        ("phimoe_without_mscale", dict(base, model_type="phimoe", rope_parameters={
            "rope_type": "longrope", "rope_theta": 1e4, "original_max_position_embeddings": 16,
            "short_factor": [1.0] * (D // 2), "long_factor": [2.0] * (D // 2),
            "long_mscale": 1.2}), plain, '"rope_parameters.short_mscale" is missing'),
        # a hybrid model's layers that are not softmax attention, by their
        # kind in layer_types ("mamba": the legacy name transformers remaps
        # to linear_attention); gated attention's q_proj without its gates
        ("qwen3_next_linear_layer", dict(base, model_type="qwen3_next", layer_types=[
            "linear_attention", "full_attention"]), plain,
         'layer 0 is a "linear_attention" layer (layer_types), not softmax attention'),
        ("legacy_mamba_layer", dict(base, model_type="llama", layer_types=[
            "mamba", "attention"]), plain, 'layer 0 is a "mamba" layer (layer_types)'),
        ("bamba_mamba_layer", dict(base, model_type="bamba", attn_layer_indices=[1]), plain,
         'layer 0 is a "mamba" layer (not in attn_layer_indices)'),
        ("bamba_attn_layer_indices_string", dict(base, model_type="bamba",
                                                 attn_layer_indices="0"), plain,
         '"attn_layer_indices" must be an array of layer numbers'),
        ("key_multiplier_outside_falcon_h1", dict(base, model_type="llama", key_multiplier=0.5),
         plain, '"key_multiplier" (k scaled) changes attention'),
        ("qwen3_next_without_gate", dict(base, model_type="qwen3_next", layer_types=[
            "full_attention"]), plain, "a gate per query head"),
        # LFM3: its gate per head (g_proj, saved as gate_proj) where use_attention_gate
        # says, and nowhere else; partial_rotary_factor with a rope type other than
        # default (which does not read it) and proportional: transformers fails
        # (its cos and sin fall short of head_dim; tests/hf's lfm3_proportional_full runs)
        ("lfm3_without_gate", dict(lfm3, use_attention_gate=True), dict(plain, **qk_norms),
         "has no gate_proj.weight (or g_proj.weight) beside"),
        ("lfm3_gate_without_use_attention_gate", dict(lfm3, use_attention_gate=False),
         dict(plain, **qk_norms, **{layers(0) + "g_proj.weight": f32(np.ones((H, dim)))}),
         'has no output gate of its own while use_attention_gate is false'),
        ("lfm3_gate_shape", lfm3,
         dict(plain, **qk_norms, **{layers(0) + "gate_proj.weight": w["q"]}),
         "(the output gate: one per query head)"),
        ("lfm3_linear_partial_rotary", dict(lfm3, rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1e4,
                               "partial_rotary_factor": 0.5},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}),
         dict(plain, **qk_norms), '"partial_rotary_factor" is 0.5 with rope type linear, and '
         'model_type "lfm3" rotates all of head_dim with it'),
        ("llama_use_attention_gate", dict(base, model_type="llama", use_attention_gate=True),
         plain, '"use_attention_gate" (an output gate per head) changes attention'),
        # RecurrentGemma: block_types' recurrent blocks (layer 0 of the default three),
        # a rope other than the default (its rotary embedding raises), layer_types beside
        ("recurrent_gemma_recurrent_layer", dict(base, model_type="recurrent_gemma"), plain,
         'layer 0 is a "recurrent" layer (block_types), not softmax attention'),
        ("recurrent_gemma_linear_rope", dict(base, model_type="recurrent_gemma", rope_parameters={
            "rope_type": "linear", "factor": 2.0}), plain,
         'model_type "recurrent_gemma" runs the default rope only'),
        ("recurrent_gemma_layer_types", dict(base, model_type="recurrent_gemma", layer_types=[
            "sliding_attention"]), plain, '"layer_types" is given'),
    ]
    # hybrid families whose attention needs what ropeattn lacks: each names it
    for family_type, what in (
            ("inkling2_text", "its attention's short convolutions of k (k_sconv)"),
            ("zamba2", "its attention is one shared block run on the hidden state concatenated"),
            ("zaya", "its q, k and v come from a convolutional projection")):
        refusals.append((family_type + "_refused", dict(base, model_type=family_type), plain,
                         f'model_type "{family_type}" is refused: {what}'))
    refusals += qk_norms_refusals(base, plain, layers(0), H, K, D)
    refusals += stacks_refusals(base, w)
    refusals += gates_refusals(base, plain, layers(0), H, D, dim)
    for name, cfg, tensors, refused, *layer in refusals:
        save(out, name, cfg, tensors, x, None, layer[0] if layer else 0, refused=refused)
    # sparse attention: each query attends to the keys an indexer picks
    # (DeepSeek-V3.2's lightning indexer and its followers: they run up to
    # index_topk keys, dsa_cases.py), or to keys compressed per block
    # (DeepSeek-V4)
    # dots.note (run: tests/hf's dots3 cases): use_dsa (it renames layer_types' kinds) and a
    # config without rope_parameters by layer type (its swa_rope_theta) are refused
    for family in ("dots3_note", "dots3_note_text"):
        save(out, family + "_use_dsa", dict(base, model_type=family, use_dsa=True,
                                            num_key_value_heads=H), plain, x,
             None, 0, refused='"use_dsa" (which renames layer_types')
        save(out, family + "_one_rope", dict(base, model_type=family, num_key_value_heads=H,
                                             layer_types=["indexed_attention"]), plain, x,
             None, 0, refused="needs rope_parameters by layer type")
        # without layer_types (the class's formula for them is not read), per_layer_config's
        # layer numbers were refused as "below num_hidden_layers (0)"
        save(out, family + "_no_layer_types",
             dict(base, model_type=family, num_key_value_heads=H, num_hidden_layers=2,
                  per_layer_config={"1": {"v_head_dim": 4}}), plain, x, None, 0,
             refused="needs layer_types")
    # Gemma 4 (run: tests/hf's gemma4_text_* cases): its assistants reuse
    # the target model's keys and values; bidirectional attention for all
    # tokens, a last layer layer_types leaves sliding (the config class makes
    # it full), per_layer_config keys other than the head's shape, and a
    # v_proj beside attention_k_eq_v are refused; attention_k_eq_v elsewhere
    for family in ("gemma4_assistant", "gemma4_unified_assistant"):
        save(out, family + "_refused", dict(base, model_type=family), plain, x, None, 0,
             refused=f'model_type "{family}" is refused: its layers all take their keys and '
             "values from the target model's")
    gemma4 = dict(base, model_type="gemma4_text", sliding_window=4, num_hidden_layers=2,
                  layer_types=["sliding_attention", "full_attention"])
    with_norms = dict(plain, **{layers(0) + "q_norm.weight": f32(np.ones(D)),
                                layers(0) + "k_norm.weight": f32(np.ones(D))})
    for name, cfg, refused in (
            ("bidirectional_all", dict(gemma4, use_bidirectional_attention="all"),
             '"use_bidirectional_attention" (attention without the causal mask) changes'),
            ("last_layer_sliding", dict(gemma4, layer_types=["full_attention",
                                                             "sliding_attention"]),
             '"layer_types" ends in a layer other than full_attention'),
            ("per_layer_window", dict(gemma4, per_layer_config={"1": {"sliding_window": 2}}),
             "\"per_layer_config.1.sliding_window\": a layer's own value of a key other than"),
            ("k_eq_v_beside_v_proj", dict(gemma4, attention_k_eq_v=True, num_hidden_layers=1,
                                          layer_types=["full_attention"]),
             "layer 0 takes its values from k_proj (attention_k_eq_v), and transformers would "
             "not load it")):
        save(out, "gemma4_" + name, cfg, with_norms, x, None, 0, refused=refused)
    save(out, "k_eq_v_llama", dict(base, model_type="llama", attention_k_eq_v=True), plain, x,
         None, 0, refused='"attention_k_eq_v" (values from k_proj) changes attention and is not '
         'supported for model_type "llama"')
    # Gemma 3n: its last num_kv_shared_layers layers take their keys and
    # values from an earlier layer (Gemma3nTextConfig's default: 15 of 35),
    # refused by name; the layers before them run
    gemma3n = dict(base, model_type="gemma3n_text", sliding_window=4,
                   layer_types=["sliding_attention", "full_attention", "sliding_attention"])
    def shared(n, prefix="model.layers.%d.self_attn."):  # q_proj, q_norm, o_proj only
        return {prefix % n + k: v for k, v in (("q_proj.weight", w["q"]),
                                               ("o_proj.weight", w["o"]),
                                               ("q_norm.weight", f32(np.ones(D))))}
    save(out, "gemma3n_kv_shared", dict(gemma3n, num_hidden_layers=3, num_kv_shared_layers=1),
         shared(2), x, None, 2, refused="layer 2 takes its keys and values from an earlier layer")
    save(out, "gemma3n_kv_shared_default", gemma3n, shared(20), x, None, 20,
         refused="num_kv_shared_layers 15 of num_hidden_layers 35, so layers 20 on")
    save(out, "gemma4_kv_shared",
         dict(gemma4, num_hidden_layers=3, num_kv_shared_layers=1,
              layer_types=["sliding_attention", "full_attention", "full_attention"]),
         shared(2), x, None, 2, refused="layer 2 takes its keys and values from an earlier layer")
    save(out, "gemma3n_multimodal_kv_shared",
         dict(model_type="gemma3n", text_config=dict(gemma3n, num_hidden_layers=3,
                                                      num_kv_shared_layers=1)),
         shared(2, "model.language_model.layers.%d.self_attn."), x, None, 2,
         refused="layer 2 takes its keys and values from an earlier layer")
    save(out, "deepseek_v4_compressed", dict(base, model_type="deepseek_v4"), plain, x, None, 0,
         refused='model_type "deepseek_v4" is refused: its compressed sparse attention')
    # 3-D positions where the rope has no sections: refused by --positions.
    pos3 = np.broadcast_to(np.arange(S), (3, B, S))
    save(out, "mrope_positions_without_sections", dict(base, model_type="qwen2"), plain, x,
         None, 0, refused="3-D positions (temporal, height, width) need a rope with "
         "mrope_section", positions=pos3)
    save(out, "mrope_positions_qwen3_vl_without_sections",
         dict(base, model_type="qwen3_vl_text", rope_theta=5e6),
         dict(plain, **{layers(0) + "q_norm.weight": f32(np.ones(D)),
                        layers(0) + "k_norm.weight": f32(np.ones(D))}), x, None, 0,
         refused="need a rope with mrope_section", positions=pos3)
    # MiniMax-M3's indexer (MiniMaxM3VLIndexer) blocks keys by slot and masks
    # them by position id: positions offset from the slots drop keys the
    # dense layer keeps, within index_topk_blocks * index_block_size = 16 too
    save(out, "minimax_m3_vl_text_positions_offset", dict(
        base, model_type="minimax_m3_vl_text", index_block_size=4, index_topk_blocks=4,
        layer_types=["minimax_m3_sparse"]),
         dict(plain, **{layers(0) + "q_norm.weight": f32(np.ones(D)),
                        layers(0) + "k_norm.weight": f32(np.ones(D))}), x, None, 0,
         refused="positions_are_slots: query 0 of sequence 0 has position 2, not its slot 0",
         positions=np.arange(S) + 2)


def rope_cases(out):
    """rope --config: Hugging Face configs pair features as their family
    does (rotate_half unless Cohere, GLM ...), on [B, S, H, D] or, with
    --shape bhsd, [B, H, S, D] as apply_rotary_pos_emb sees q."""
    H, D = 4, 16
    d = os.path.join(out, "rope")
    os.makedirs(d, exist_ok=True)
    x = f32(RNG.normal(0, 1, (B, S, H, D)))
    np.save(os.path.join(d, "x_bshd.npy"), x.astype(np.float32))
    np.save(os.path.join(d, "x_bhsd.npy"), x.transpose(0, 2, 1, 3).astype(np.float32))
    pos = np.broadcast_to(np.arange(S, dtype=np.float64), (B, S))
    for name, cfg, layout in (("llama", {"model_type": "llama", "rope_theta": 5e5,
                                         "num_attention_heads": H, "head_dim": D}, "half"),
                              ("cohere", {"model_type": "cohere", "rope_theta": 5e5,
                                          "num_attention_heads": H, "head_dim": D},
                               "interleaved"),
                              ("plain", {"rope_theta": 5e5, "head_dim": D}, "half")):
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(cfg, f)
        y = rope(x, pos, inv_freq(5e5, D), layout)
        np.save(os.path.join(d, "y_%s_bshd.npy" % name), y)
        np.save(os.path.join(d, "y_%s_bhsd.npy" % name), y.transpose(0, 2, 1, 3))
    # M-RoPE: 3-D positions [3, B, S] (each row its own image) and [3, S]
    # (every row alike); freqs --hf-shape: the cos and sin [S, D] transformers
    # puts together from them.
    pos3 = np.stack([rope_index([("text", 2), ("grid", 2, 2, 2, 1), ("text", 2)]),
                     rope_index([("text", 5), ("grid", 1, 1, 5, 1), ("text", 2)])], 1)
    np.save(os.path.join(d, "pos3.npy"), pos3.astype(np.int64))
    np.save(os.path.join(d, "pos3_shared.npy"), pos3[:, 0].astype(np.int32))
    for name, model_type, section, interleaved in (("qwen2_vl", "qwen2_vl", [2, 3, 3], False),
                                                   ("qwen3_vl", "qwen3_vl_text", [3, 3, 2],
                                                    True)):
        cfg = {"model_type": model_type, "rope_theta": 1e6, "num_attention_heads": H,
               "head_dim": D, "rope_scaling": {"rope_type": "default", "mrope_section": section,
                                               "mrope_interleaved": interleaved}}
        with open(os.path.join(d, name + ".json"), "w") as f:
            json.dump(cfg, f)
        inv = inv_freq(1e6, D)
        p = pos3.astype(np.float64)
        np.save(os.path.join(d, "y_%s_pos3.npy" % name), mrope(x, p, inv, section, interleaved))
        shared = np.stack([p[:, 0], p[:, 0]], 1)
        np.save(os.path.join(d, "y_%s_pos3_shared.npy" % name),
                mrope(x, shared, inv, section, interleaved))
        cos, sin = mrope_cos_sin(p[:, 0], inv, section, interleaved)
        np.save(os.path.join(d, "cos_%s.npy" % name), cos)
        np.save(os.path.join(d, "sin_%s.npy" % name), sin)
    np.save(os.path.join(d, "x_b3.npy"), np.concatenate([x, x[:1]]).astype(np.float32))


if __name__ == "__main__":
    from mla_cases import mla_cases  # DeepSeek-V2, V3, Kimi K2: tests/families/mla_cases.py
    from fp8_cases import fp8_cases  # block-FP8 checkpoints: tests/families/fp8_cases.py
    from plain_rows_cases import plain_rows_cases  # tests/families/plain_rows_cases.py
    from rope_rows_cases import rope_rows_cases  # tests/families/rope_rows_cases.py
    from text_refusals_cases import text_refusals_cases  # tests/families/text_refusals_cases.py
    from encoder_audio_rows_cases import encoder_audio_rows_cases  # tests/families/ (same name)
    from parts_refusals_cases import parts_refusals_cases  # tests/families/ (same name)
    family_cases(sys.argv[1])
    mla_cases(sys.argv[1])
    fp8_cases(sys.argv[1])
    plain_rows_cases(sys.argv[1])
    rope_rows_cases(sys.argv[1])
    text_refusals_cases(sys.argv[1])
    encoder_audio_rows_cases(sys.argv[1])
    parts_refusals_cases(sys.argv[1])
    rope_cases(sys.argv[1])
