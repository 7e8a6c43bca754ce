#!/usr/bin/env bash
# test_cli.sh — the ropeattn command line, end to end.
#
# Fixtures are made here by /usr/bin/python3 with numpy (no torch): tiny
# checkpoints (dim 64, H 4, Hkv 2, B 2, S 5) in F32, F16 and BF16 with the
# seed's names, and with Hugging Face names and permuted wq/wk rows; a float64
# numpy reference of the seed's Attention.forward, of RoPE and of the freqs
# tables; and broken files.  Every bad input must end with an exit code in
# 1..127, exactly one line on stderr starting "ropeattn: " and no output file.
#
# Prints "cli: N passed, N failed" last; exits 1 if anything failed.
SUITE=cli
source "$(dirname "$0")/shell_common.sh"
ROOT=$PWD
require_ropeattn_and_numpy

# ---- fixtures -------------------------------------------------------------
cat >"$TMP/helper.py" <<'EOF'
"""Fixtures and checks for test_cli.sh (numpy only)."""
import json, os, struct, sys
import numpy as np

DIM, H, HKV, B, S = 64, 4, 2, 2, 5
D = DIM // H

def bf16_bits(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)

def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)

def encode(a, dtype):
    """Raw bytes and the float64 values the file really holds."""
    if dtype == "F32":
        a = a.astype(np.float32); return a.tobytes(), a.astype(np.float64)
    if dtype == "F16":
        a = a.astype(np.float16); return a.tobytes(), a.astype(np.float64)
    if dtype == "BF16":
        bits = bf16_bits(a); return bits.tobytes(), bf16_values(bits).astype(np.float64)
    if dtype == "I32":
        a = np.round(a * 100).astype(np.int32); return a.tobytes(), None
    raise ValueError(dtype)

def write_safetensors(path, tensors, header_len=None, offsets=None):
    """tensors: list of (name, dtype, shape, raw bytes)."""
    header, data, at = {}, b"", 0
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [at, at + len(raw)]}
        data += raw; at += len(raw)
    if offsets:
        header[offsets[0]]["data_offsets"] = offsets[1]
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", header_len if header_len else len(text)) + text + data)

def permute_rows(w, heads):
    """Interleaved rows (a0 b0 a1 b1 ...) to half rows (a0 a1 ... b0 b1 ...), per head."""
    d = w.shape[0] // heads
    return w.reshape(heads, d // 2, 2, -1).transpose(0, 2, 1, 3).reshape(w.shape)

def rope(x, start, theta, layout, inverse=False):
    """x: [B, S, heads, D] float64."""
    d = x.shape[-1]
    freqs = 1.0 / theta ** (np.arange(0, d, 2)[: d // 2] / d)
    angle = np.outer(np.arange(start, start + x.shape[1]), freqs)[None, :, None, :]
    cos, sin = np.cos(angle), np.sin(angle) * (-1 if inverse else 1)
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return np.stack([a * cos - b * sin, a * sin + b * cos], axis=-1).reshape(x.shape)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)

def seed_attention(x, wq, wk, wv, wo, h, hkv, start=0, theta=10000.0, layout="interleaved"):
    """The seed's Attention.forward in float64.  x: [B, S, dim]."""
    b, s, dim = x.shape; d = dim // h
    q = rope((x @ wq.T).reshape(b, s, h, d), start, theta, layout)
    k = rope((x @ wk.T).reshape(b, s, hkv, d), start, theta, layout)
    v = (x @ wv.T).reshape(b, s, hkv, d)
    k, v = np.repeat(k, h // hkv, axis=2), np.repeat(v, h // hkv, axis=2)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    scores = scores + np.triu(np.full((s, s), -np.inf), 1)
    p = np.exp(scores - scores.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
    out = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, h * d)
    return out @ wo.T

def weights(seed):
    rng = np.random.default_rng(seed)
    bound = 1 / np.sqrt(DIM)
    shapes = [(H * D, DIM), (HKV * D, DIM), (HKV * D, DIM), (DIM, H * D)]
    return [rng.uniform(-bound, bound, shape) for shape in shapes]

SEED_NAMES = ["wq.weight", "wk.weight", "wv.weight", "wo.weight"]
HF_NAMES = ["q_proj.weight", "k_proj.weight", "v_proj.weight", "o_proj.weight"]

def checkpoint(path, ws, dtype="F32", names=SEED_NAMES, prefix="", drop=None, bad_dtype=None):
    tensors, held = [], []
    for name, w in zip(names, ws):
        kind = bad_dtype if bad_dtype and name == names[0] else dtype
        raw, values = encode(w, kind)
        held.append(values)
        if name != drop:
            tensors.append((prefix + name, kind, w.shape, raw))
    write_safetensors(path, tensors)
    return held

def gen(out):
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (B, S, DIM)).astype(np.float32)
    np.save(f"{out}/x.npy", x)
    np.save(f"{out}/x2d.npy", x[0])
    x64 = x.astype(np.float64)
    ws = weights(1)
    for dtype in ["F32", "F16", "BF16"]:
        held = checkpoint(f"{out}/seed_{dtype}.safetensors", ws, dtype)
        np.save(f"{out}/ref_{dtype}.npy", seed_attention(x64, *held, H, HKV))
    held = [encode(w, "F32")[1] for w in ws]
    np.save(f"{out}/ref_start7_theta500k.npy",
            seed_attention(x64, *held, H, HKV, start=7, theta=500000.0))
    np.save(f"{out}/ref_half.npy", seed_attention(x64, *held, H, HKV, layout="half"))
    hf = [permute_rows(ws[0], H), permute_rows(ws[1], HKV), ws[2], ws[3]]
    checkpoint(f"{out}/hf.safetensors", hf, names=HF_NAMES, prefix="model.layers.0.self_attn.")
    checkpoint(f"{out}/hf_bare.safetensors", hf, names=HF_NAMES, prefix="self_attn.")
    ws1 = weights(2)
    hf1 = [permute_rows(ws1[0], H), permute_rows(ws1[1], HKV), ws1[2], ws1[3]]
    tensors = []
    for layer, layer_ws in [(0, hf), (1, hf1)]:
        for name, w in zip(HF_NAMES, layer_ws):
            tensors.append((f"model.layers.{layer}.self_attn.{name}", "F32", w.shape,
                            w.astype(np.float32).tobytes()))
    write_safetensors(f"{out}/hf_2layers.safetensors", tensors)
    # the same two layers as a sharded checkpoint, layer 0 split over both
    # shards, and broken indexes
    os.makedirs(f"{out}/sharded", exist_ok=True)
    shard_of = {}
    for i, (name, dtype, shape, raw) in enumerate(tensors):
        shard_of[name] = "model-00001-of-00002.safetensors" if i % 2 == 0 else \
                         "model-00002-of-00002.safetensors"
    for shard in sorted(set(shard_of.values())):
        write_safetensors(f"{out}/sharded/{shard}", [t for t in tensors if shard_of[t[0]] == shard])
    write_safetensors(f"{out}/sharded/twice.safetensors", tensors[:1])
    indexes = {
        "model.safetensors.index.json": shard_of,
        "missing.index.json": {**shard_of, "extra.weight": "model-00003-of-00003.safetensors"},
        "twice.index.json": {**shard_of, "x": "twice.safetensors"},
        "folder.index.json": {**shard_of, "x": "../hf.safetensors"},
    }
    for name, weight_map in indexes.items():
        with open(f"{out}/sharded/{name}", "w") as f:
            json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)
    # a norm over the whole q projection (OLMo 2), not over each head
    write_safetensors(f"{out}/hf_fullnorm.safetensors", tensors[:4] +
                      [("model.layers.0.self_attn.q_norm.weight", "F32", (H * D,),
                        np.ones(H * D, np.float32).tobytes())])
    held1 = [encode(w, "F32")[1] for w in ws1]
    np.save(f"{out}/ref_layer1.npy", seed_attention(x64, *held1, H, HKV))
    with open(f"{out}/llama.json", "w") as f:
        json.dump({"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": HKV,
                   "head_dim": D, "rope_theta": 10000.0, "model_type": "llama"}, f)
    with open(f"{out}/config_theta.json", "w") as f:
        json.dump({"num_attention_heads": H, "rope_theta": 500000.0}, f)
    with open(f"{out}/config_bad_hidden.json", "w") as f:
        json.dump({"hidden_size": 128, "num_attention_heads": H}, f)
    with open(f"{out}/config_gemma.json", "w") as f:
        json.dump({"num_attention_heads": H, "query_pre_attn_scalar": 256}, f)
    with open(f"{out}/config_bad_eps.json", "w") as f:
        json.dump({"num_attention_heads": H, "rms_norm_eps": -1e-6}, f)
    # sliding windows, as transformers reads them (src/hf/fields_window.c)
    windows = {
        "cw_short": {"sliding_window": S - 1},                       # Mistral v0.1
        "cw_exact": {"sliding_window": S},
        "cw_off": {"sliding_window": 2, "use_sliding_window": False,  # Qwen2 (v4)
                   "max_window_layers": 0},
        "cw_from1": {"sliding_window": 2, "use_sliding_window": True,
                     "max_window_layers": 1},
        "cw_types": {"sliding_window": 2,
                     "layer_types": ["full_attention", "sliding_attention"]},
        "cw_chunked": {"layer_types": ["chunked_attention", "full_attention"]},
    }
    for name, keys in windows.items():
        with open(f"{out}/{name}.json", "w") as f:
            json.dump({"num_attention_heads": H, **keys}, f)

    # rope and freqs
    xr = rng.uniform(-1, 1, (2, 6, 3, 8)).astype(np.float32)
    np.save(f"{out}/rope_x.npy", xr)
    for layout in ["interleaved", "half"]:
        np.save(f"{out}/rope_ref_{layout}.npy", rope(xr.astype(np.float64), 3, 10000.0, layout))
    np.save(f"{out}/rope_ref_far.npy", rope(xr.astype(np.float64), 1000000, 500000.0, "half"))
    angle = np.outer(np.arange(100), 1.0 / 10000.0 ** (np.arange(0, 16, 2) / 16))
    np.save(f"{out}/cos_ref.npy", np.cos(angle))
    np.save(f"{out}/sin_ref.npy", np.sin(angle))

    # broken files
    good = open(f"{out}/x.npy", "rb").read()
    open(f"{out}/truncated.npy", "wb").write(good[: len(good) - 100])
    open(f"{out}/badmagic.npy", "wb").write(b"\x93NUMPX" + good[6:])
    np.save(f"{out}/wrongdim.npy", rng.uniform(-1, 1, (B, S, 32)).astype(np.float32))
    np.save(f"{out}/x4d.npy", x.reshape(B, S, H, D))
    np.save(f"{out}/rope_3d.npy", xr[0])
    np.save(f"{out}/rope_odd.npy", rng.uniform(-1, 1, (1, 2, 2, 7)).astype(np.float32))
    seed_tensors = [(n, "F32", w.shape, w.astype(np.float32).tobytes())
                    for n, w in zip(SEED_NAMES, ws)]
    write_safetensors(f"{out}/st_badlen.safetensors", seed_tensors, header_len=1 << 40)
    write_safetensors(f"{out}/st_badoffsets.safetensors", seed_tensors,
                      offsets=("wo.weight", [0, 1 << 30]))
    checkpoint(f"{out}/st_missing.safetensors", ws, drop="wo.weight")
    checkpoint(f"{out}/st_i32.safetensors", ws, bad_dtype="I32")
    write_safetensors(f"{out}/st_bias.safetensors", seed_tensors +
                      [("wq.bias", "F32", (ws[0].shape[0],), b"\0" * 4 * ws[0].shape[0])])
    write_safetensors(f"{out}/st_badbias.safetensors", seed_tensors +
                      [("wk.bias", "F32", (ws[1].shape[0] + 1,), b"\0" * 4 * (ws[1].shape[0] + 1))])
    write_safetensors(f"{out}/st_notensors.safetensors",
                      [("tok_embeddings.weight", "F32", (2, 2), b"\0" * 16)])
    write_safetensors(f"{out}/st_badshape.safetensors",
                      [(n, "F32", w.shape, w.astype(np.float32).tobytes())
                       for n, w in zip(SEED_NAMES, [ws[0], ws[1][:-1], ws[2], ws[3]])])

def compare(got_path, ref_path, tol):
    got, ref = np.load(got_path), np.load(ref_path)
    if got.dtype != np.float32 or got.shape != ref.shape:
        print(f"{got_path}: {got.dtype} {got.shape}, expected float32 {ref.shape}")
        return 1
    if not np.all(np.isfinite(got)):
        print(f"{got_path}: not finite"); return 1
    err = np.max(np.abs(got.astype(np.float64) - ref)) / np.max(np.abs(ref))
    if err > tol:
        i = np.unravel_index(np.argmax(np.abs(got - ref)), ref.shape)
        print(f"{got_path} vs {ref_path}: rel err {err:.3g} > {tol:g}; worst at {i}: "
              f"{got[i]} vs {ref[i]}")
        return 1
    return 0

def check_bench(path):
    records = json.load(open(path))
    keys = {"name", "shape", "median_seconds", "rate", "rate_unit", "limit_name", "limit_rate",
            "fraction", "target", "torch_seconds", "vs_torch", "threads", "cpu", "cpu_family",
            "cpu_model", "simd", "vector_bits", "one_thread"}
    names = [r["name"] for r in records]
    # rope_decode_f32's limit, and the limit's STREAM-style reference as its part
    ok = names == ["stream_rmw", "rmw", "rope_decode_f32"] and all(keys <= set(r) for r in records)
    ok = ok and all(("bytes" in r) != ("flops" in r) for r in records)
    ok = ok and records[1]["parts"] == ["stream_rmw"] and records[1]["ratio_to_parts"] > 0
    ok = ok and records[1]["limit_rate"] is None and records[2]["limit_rate"] > 0
    ok = ok and records[2]["limit_name"] == "rmw" and records[2]["fraction"] > 0
    ok = ok and records[2]["bytes"] == 2 * 4 * 40 * 128 and records[2]["median_seconds"] > 0
    if not ok:
        print(f"unexpected bench records: {records}")
    return 0 if ok else 1

def check_bench_one_thread(path):
    """--threads 2: the decode case and its limit on one thread too, the
    reference not; the in-cache case sized by L2; the machine in each."""
    r = {x["name"]: x for x in json.load(open(path))}
    ok = list(r) == ["sgemm", "stream_sum32M", "read32M", "attention_decode_f32_l4096",
                     "attention_decode_f32_incache"]
    ok = ok and all(x["threads"] == 2 and x["cpu"] and x["simd"] and x["vector_bits"] >= 128
                    for x in r.values())
    ok = ok and r["stream_sum32M"]["one_thread"] is None
    ok = ok and r["read32M"]["one_thread"]["rate"] > 0 and r["sgemm"]["one_thread"]["rate"] > 0
    d = r["attention_decode_f32_l4096"]
    ok = ok and d["target"] == 0.85 and d["one_thread"]["target"] == 0.8
    ok = ok and d["one_thread"]["fraction"] > 0 and d["one_thread"]["limit_rate"] > 0
    ok = ok and d["one_thread"]["threads"] == 1
    c = r["attention_decode_f32_incache"]
    ok = ok and c["limit_name"] == "sgemm" and c["one_thread"]["fraction"] > 0
    ok = ok and "L2" in c["shape"] and c["flops"] % (4 * 4 * 128 * 16) == 0
    if not ok:
        print(f"unexpected bench records: {r}")
    return 0 if ok else 1

def check_bench_svg(path, case, one_thread):
    """An SVG document with one bar per judged case, named, and under it a
    thin bar (class one-thread) where the case's one-thread column was
    measured apart from the run's, with the legend saying so."""
    import xml.etree.ElementTree as ET
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.parse(path).getroot()
    texts = [t.text or "" for t in root.iter(ns + "text")]
    groups = [g for g in root.iter(ns + "g") if g.find(ns + "rect") is not None]
    ok = root.tag == ns + "svg" and case in texts and len(groups) == 1
    thin = [r for g in groups for r in g.iter(ns + "rect") if r.get("class") == "one-thread"]
    ok = ok and len(thin) == one_thread and all(float(r.get("width")) > 0 for r in thin)
    ok = ok and any(t.startswith("thin bars:") for t in texts) == bool(one_thread)
    ok = ok and any("; 1t " in t for t in texts) == bool(one_thread)
    if not ok:
        print(f"{path}: unexpected chart: {texts}")
    return 0 if ok else 1

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen": gen(sys.argv[2])
    elif cmd == "compare": sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    elif cmd == "slice0":
        np.save(sys.argv[3], np.load(sys.argv[2])[0])
    elif cmd == "bench": sys.exit(check_bench(sys.argv[2]))
    elif cmd == "bench_one_thread": sys.exit(check_bench_one_thread(sys.argv[2]))
    elif cmd == "bench_svg": sys.exit(check_bench_svg(sys.argv[2], sys.argv[3], int(sys.argv[4])))
EOF
if ! "$PY" "$TMP/helper.py" gen "$TMP"; then fail "fixture generation"; summary; fi

# ---- rope types, positions, partial rotary, layout conversion ---------------
# References follow transformers' modeling_rope_utils formulas, in float64.
cat >"$TMP/rope_helper.py" <<'EOF'
"""Rope-type, positions and convert-layout fixtures and checks (numpy only)."""
import json, math, os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import helper

def inv_freq(rtype, d, base, p, M=None, L=None):
    """transformers' inverse frequencies and attention factor; d is rotary_dim."""
    i = np.arange(0, d, 2, dtype=np.float64)
    default = 1.0 / base ** (i / d)
    if rtype == "default":
        return default, 1.0
    if rtype == "linear":
        return default / p["factor"], 1.0
    if rtype == "dynamic":
        L = max(L or M, M)
        b = base * ((p["factor"] * L / M) - (p["factor"] - 1)) ** (d / (d - 2))
        return 1.0 / b ** (i / d), 1.0
    if rtype == "yarn":
        orig = p.get("original_max_position_embeddings") or M
        factor = p.get("factor") or M / orig
        def get_mscale(scale, mscale=1):
            return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0
        af = p.get("attention_factor")
        if af is None:
            if p.get("mscale") and p.get("mscale_all_dim"):
                af = get_mscale(factor, p["mscale"]) / get_mscale(factor, p["mscale_all_dim"])
            else:
                af = get_mscale(factor)
        beta_fast, beta_slow = p.get("beta_fast") or 32, p.get("beta_slow") or 1
        def correction_dim(rot):
            return d * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        low, high = correction_dim(beta_fast), correction_dim(beta_slow)
        if p.get("truncate", True):
            low, high = math.floor(low), math.ceil(high)
        low, high = max(low, 0), min(high, d - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0, 1)
        keep = 1 - ramp
        return default / factor * (1 - keep) + default * keep, af
    if rtype == "llama3":
        factor, lo, hi = p["factor"], p["low_freq_factor"], p["high_freq_factor"]
        old = p["original_max_position_embeddings"]
        wavelen = 2 * math.pi / default
        out = np.where(wavelen > old / lo, default / factor, default)
        with np.errstate(divide="ignore", invalid="ignore"):  # lo == hi: no medium band
            smooth = (old / wavelen - lo) / (hi - lo)
            smoothed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
        return np.where(medium, smoothed, out), 1.0
    if rtype == "longrope":
        orig = p["original_max_position_embeddings"]
        factor = p.get("factor") or M / orig
        af = p.get("attention_factor")
        if af is None:
            af = 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(orig))
        ext = np.array(p["long_factor"] if L and L > orig else p["short_factor"], np.float64)
        return 1.0 / (ext * base ** (i / d)), af
    raise ValueError(rtype)

def tables(positions, inv, af):
    angle = np.asarray(positions, np.float64)[..., None] * inv
    return af * np.cos(angle), af * np.sin(angle)

def apply_rope(x, cos, sin, layout, rot):
    """x [B, S, H, D]; cos, sin [S, rot/2] or [B, S, rot/2]."""
    if cos.ndim == 2:
        cos, sin = cos[None], sin[None]
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    xr, rest = x[..., :rot], x[..., rot:]
    if layout == "interleaved":
        a, b = xr[..., 0::2], xr[..., 1::2]
        out = np.stack([a * cos - b * sin, a * sin + b * cos], -1).reshape(xr.shape)
    else:
        a, b = xr[..., : rot // 2], xr[..., rot // 2:]
        out = np.concatenate([a * cos - b * sin, a * sin + b * cos], -1)
    return np.concatenate([out, rest], -1)

def attention(x, wq, wk, wv, wo, h, hkv, cos, sin, layout, rot):
    b, s, dim = x.shape
    d = wq.shape[0] // h
    q = apply_rope((x @ wq.T).reshape(b, s, h, d), cos, sin, layout, rot)
    k = apply_rope((x @ wk.T).reshape(b, s, hkv, d), cos, sin, layout, rot)
    v = (x @ wv.T).reshape(b, s, hkv, d)
    k, v = np.repeat(k, h // hkv, axis=2), np.repeat(v, h // hkv, axis=2)
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + np.triu(np.full((s, s), -np.inf), 1)
    pr = np.exp(scores - scores.max(-1, keepdims=True))
    pr /= pr.sum(-1, keepdims=True)
    return (pr @ v).transpose(0, 2, 1, 3).reshape(b, s, h * d) @ wo.T

def compact(obj):
    return json.dumps(obj, separators=(",", ":"))

def interesting(orig):
    return np.array(sorted({0, 1, 2, 7, orig - 1, orig, orig + 1, 12345, 100000,
                            (1 << 20) - 1}), np.int64)

def freqs_cases(out):
    rng = np.random.default_rng(7)
    names = []
    def add(name, args, d, rtype, base, p, M=None, L=None, positions=None,
            dtype=np.int32, shape=None, config=None):
        if config is not None:
            with open(f"{out}/fc_{name}.json", "w") as f:
                json.dump(config, f)
            args = args + ["--config", f"fc_{name}.json"]
        if positions is None:
            positions = np.arange(100, dtype=np.int64)
            args = args + ["--end", "100"]
        else:
            arr = positions.astype(dtype)
            np.save(f"{out}/pos_{name}.npy", arr.reshape(shape) if shape else arr)
            args = args + ["--positions", f"pos_{name}.npy"]
        if L is None:
            L = int(positions.max()) + 1
        inv, af = inv_freq(rtype, d, base, p, M, L)
        c, s = tables(positions, inv, af)
        np.save(f"{out}/cref_{name}.npy", c)
        np.save(f"{out}/sref_{name}.npy", s)
        with open(f"{out}/args_{name}", "w") as f:
            f.write("\n".join(args) + "\n")
        names.append(name)

    add("default_d64", ["--head-dim", "64"], 64, "default", 10000.0, {},
        positions=interesting(4096))
    add("default_end_theta", ["--head-dim", "16", "--theta", "500000"], 16, "default", 5e5, {})
    p = {"type": "linear", "factor": 4.0, "rope_theta": 500000.0}
    add("linear", ["--head-dim", "64", "--rope-parameters", compact(p)], 64, "linear", 5e5, p,
        positions=interesting(4096)[:-2], dtype=np.int64, shape=(2, 4))
    cfg = {"head_dim": 64, "max_position_embeddings": 2048, "rope_theta": 10000.0,
           "rope_scaling": {"type": "dynamic", "factor": 2.0}}
    p = cfg["rope_scaling"]
    add("dynamic", [], 64, "dynamic", 1e4, p, M=2048, positions=interesting(2048), config=cfg)
    # a rope for L: positions of a longer sequence are refused (fc_*_beyond)
    add("dynamic_seq_len", ["--seq-len", "3000"], 64, "dynamic", 1e4, p, M=2048, L=3000,
        positions=interesting(2048)[interesting(2048) < 3000], config=cfg)
    add("dynamic_short", [], 64, "dynamic", 1e4, p, M=2048, config=cfg)
    add("dynamic_flag_max", ["--max-position-embeddings", "64"], 64, "dynamic", 1e4, p, M=64,
        config=cfg)
    cfg = {"hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128,
           "rope_theta": 1000000.0, "max_position_embeddings": 131072,
           "rope_scaling": {"type": "yarn", "factor": 4.0,
                            "original_max_position_embeddings": 32768}}
    add("yarn_qwen", [], 128, "yarn", 1e6, cfg["rope_scaling"], M=131072,
        positions=interesting(32768), dtype=np.int64, config=cfg)
    p = {"rope_type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 0.5,
         "beta_fast": 16, "beta_slow": 2, "original_max_position_embeddings": 4096,
         "rope_theta": 10000}
    add("yarn_mscale", ["--head-dim", "64", "--rope-parameters", compact(p)], 64, "yarn", 1e4,
        p, positions=interesting(4096))
    p = {"rope_type": "yarn", "factor": 32.0, "truncate": False, "attention_factor": 1.25,
         "original_max_position_embeddings": 4096}
    add("yarn_notrunc", ["--head-dim", "64", "--theta", "150000", "--rope-parameters",
        compact(p)], 64, "yarn", 150000.0, p, positions=interesting(4096))
    p = {"rope_type": "yarn", "factor": None, "original_max_position_embeddings": 4096}
    add("yarn_derived", ["--head-dim", "64", "--max-position-embeddings", "16384",
        "--rope-parameters", compact(p)], 64, "yarn", 1e4, p, M=16384,
        positions=interesting(4096), dtype=np.int64)
    cfg = {"head_dim": 32, "max_position_embeddings": 4096,
           "rope_scaling": {"rope_type": "yarn", "factor": 8}}
    add("yarn_original_is_max", [], 32, "yarn", 1e4, cfg["rope_scaling"], M=4096,
        positions=interesting(4096), config=cfg)
    p = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
         "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    cfg = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
           "max_position_embeddings": 131072, "rope_theta": 500000.0, "rope_scaling": p}
    add("llama3_31", [], 128, "llama3", 5e5, p, positions=interesting(8192), config=cfg)
    p = {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 32.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    cfg = {"head_dim": 64, "max_position_embeddings": 131072, "rope_parameters": p}
    add("llama3_v5", [], 64, "llama3", 5e5, p, positions=interesting(8192), dtype=np.int64,
        config=cfg)
    # Llama 4 Scout has low_freq_factor == high_freq_factor: no smoothed band.
    for name, lo, hi in (("llama3_equal", 4.0, 4.0), ("llama3_low_above_high", 4.0, 1.0)):
        p = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": lo,
             "high_freq_factor": hi, "original_max_position_embeddings": 8192}
        add(name, ["--head-dim", "128", "--theta", "500000", "--rope-parameters", compact(p)],
            128, "llama3", 5e5, p, positions=interesting(8192))
    short = [float(v) for v in np.round(rng.uniform(1.0, 1.2, 48), 6)]
    long = [float(v) for v in np.round(rng.uniform(1.0, 60.0, 48), 6)]
    p = {"type": "longrope", "short_factor": short, "long_factor": long}
    cfg = {"hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
           "original_max_position_embeddings": 4096, "rope_theta": 10000.0, "rope_scaling": p}
    pp = dict(p, original_max_position_embeddings=4096)
    add("longrope_long", [], 96, "longrope", 1e4, pp, M=131072, positions=interesting(4096),
        config=cfg)
    add("longrope_short", [], 96, "longrope", 1e4, pp, M=131072,
        positions=np.array([0, 1, 100, 4095, 17]), config=cfg)
    add("longrope_seq_len", ["--seq-len", "4096"], 96, "longrope", 1e4, pp, M=131072, L=4096,
        positions=interesting(4096)[interesting(4096) < 4096], dtype=np.int64, config=cfg)
    np.save(f"{out}/fc_pos_4096.npy", np.array([0, 4096], np.int64))
    short = [float(v) for v in np.round(rng.uniform(1.0, 1.2, 48), 6)]
    long = [float(v) for v in np.round(rng.uniform(1.0, 60.0, 48), 6)]
    p = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
         "factor": 32.0, "short_factor": short, "long_factor": long,
         "original_max_position_embeddings": 4096}
    add("longrope_partial_v5", ["--head-dim", "128", "--rope-parameters", compact(p)], 96,
        "longrope", 1e4, p, positions=interesting(4096))
    cfg = {"head_dim": 80, "partial_rotary_factor": 0.4, "rope_theta": 10000.0}
    add("partial_default", [], 32, "default", 1e4, {}, positions=interesting(4096), config=cfg)
    with open(f"{out}/freqs_cases", "w") as f:
        f.write("\n".join(names) + "\n")

def compare_abs(got_path, ref_path, tol):
    got, ref = np.load(got_path), np.load(ref_path)
    if got.dtype != np.float32 or got.shape != ref.shape:
        print(f"{got_path}: {got.dtype} {got.shape}, expected float32 {ref.shape}")
        return 1
    err = np.max(np.abs(got.astype(np.float64) - ref))
    if not err <= tol:
        i = np.unravel_index(np.argmax(np.abs(got - ref)), ref.shape)
        print(f"{got_path}: max |err| {err:.3g} > {tol:g} at {i}: {got[i]} vs {ref[i]}")
        return 1
    return 0

def rope_cases(out):
    rng = np.random.default_rng(11)
    x = rng.uniform(-1, 1, (2, 6, 3, 8)).astype(np.float32)
    np.save(f"{out}/rp_x.npy", x)
    pos = np.array([5, 0, 5, 1000, 3, 2], np.int64)          # any order, repeats
    np.save(f"{out}/rp_pos_s.npy", pos)
    inv, af = inv_freq("default", 8, 1e4, {})
    c, s = tables(pos, inv, af)
    np.save(f"{out}/rp_ref_shared.npy", apply_rope(x.astype(np.float64), c, s, "interleaved", 8))
    x2 = rng.uniform(-1, 1, (2, 5, 3, 16)).astype(np.float32)
    np.save(f"{out}/rp_x2.npy", x2)
    np.save(f"{out}/rp_x2_64.npy", x2.astype(np.float64))
    pos2 = np.array([[0, 1, 2, 3, 4], [70000, 64, 63, 9, 1 << 20]], np.int32)
    np.save(f"{out}/rp_pos_bs.npy", pos2)
    cfg = {"head_dim": 16, "partial_rotary_factor": 0.5, "max_position_embeddings": 256,
           "rope_scaling": {"rope_type": "yarn", "factor": 4.0,
                            "original_max_position_embeddings": 64}}
    json.dump(cfg, open(f"{out}/rp_cfg.json", "w"))
    inv, af = inv_freq("yarn", 8, 1e4, cfg["rope_scaling"], M=256)
    c, s = tables(pos2, inv, af)
    np.save(f"{out}/rp_ref_batch.npy", apply_rope(x2.astype(np.float64), c, s, "half", 8))
    cfg["rope_scaling"]["attention_factor"] = 1.0   # the inverse undoes a pure rotation
    json.dump(cfg, open(f"{out}/rp_cfg_af1.json", "w"))
    np.save(f"{out}/rp_pos_bad_shape.npy", np.zeros((3, 6), np.int64))
    np.save(f"{out}/rp_pos_f32.npy", np.zeros(6, np.float32))
    np.save(f"{out}/rp_pos_neg.npy", np.array([0, 1, -2, 3, 4, 5], np.int64))
    np.save(f"{out}/rp_pos_empty.npy", np.zeros(0, np.int64))

def attention_cases(out):
    x = np.load(f"{out}/x.npy").astype(np.float64)
    DIM, H, HKV = helper.DIM, helper.H, helper.HKV
    D = DIM // H
    ws = helper.weights(3)
    held = helper.checkpoint(f"{out}/hf_plain.safetensors", ws, names=helper.HF_NAMES,
                             prefix="model.layers.0.self_attn.")
    # HF names, rotate_half on the first rotary_dim = 8 of head_dim 16 features.
    cfg = {"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": HKV,
           "partial_rotary_factor": 0.5, "rope_theta": 10000.0}
    json.dump(cfg, open(f"{out}/at_partial.json", "w"))
    inv, af = inv_freq("default", 8, 1e4, {})
    c, s = tables(np.arange(helper.S), inv, af)
    np.save(f"{out}/at_ref_partial.npy", attention(x, *held, H, HKV, c, s, "half", 8))
    # longrope + partial rotary (v5 rope_parameters), HF names, half layout;
    # the long factors once the last position passes the original length.
    p = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
         "short_factor": [1.0, 1.5, 2.0, 3.0], "long_factor": [2.0, 4.0, 8.0, 16.0],
         "original_max_position_embeddings": 32}
    cfg = {"hidden_size": DIM, "num_attention_heads": H, "max_position_embeddings": 256,
           "rope_parameters": p}
    json.dump(cfg, open(f"{out}/at_longrope.json", "w"))
    for start in (0, 40):
        pos = np.arange(start, start + helper.S)
        inv, af = inv_freq("longrope", 8, 1e4, p, M=256, L=start + helper.S)
        c, s = tables(pos, inv, af)
        np.save(f"{out}/at_ref_longrope_{start}.npy",
                attention(x, *held, H, HKV, c, s, "half", 8))
    # Seed names (interleaved), llama3 from config.json, positions per row.
    p = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
         "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    cfg = {"num_attention_heads": H, "rope_theta": 10000.0, "rope_scaling": p}
    json.dump(cfg, open(f"{out}/at_llama3.json", "w"))
    pos = np.array([[3, 900, 901, 20, 1 << 19], [0, 1, 2, 3, 4]], np.int64)
    np.save(f"{out}/at_pos.npy", pos)
    held = [helper.encode(w, "F32")[1] for w in helper.weights(1)]
    inv, af = inv_freq("llama3", D, 1e4, p)
    c, s = tables(pos, inv, af)
    np.save(f"{out}/at_ref_llama3.npy", attention(x, *held, H, HKV, c, s, "interleaved", D))
    bad = {"num_attention_heads": H, "rope_scaling": {"rope_type": "llama3", "factor": 8}}
    json.dump(bad, open(f"{out}/at_llama3_missing.json", "w"))
    json.dump({"num_attention_heads": H, "partial_rotary_factor": 0.2},   # int(3.2) = 3
              open(f"{out}/at_odd_rotary.json", "w"))
    json.dump({"num_attention_heads": H, "rope_scaling": {"type": "longrope",
               "short_factor": [1, 2], "long_factor": [1, 2],
               "original_max_position_embeddings": 32}, "max_position_embeddings": 64},
              open(f"{out}/at_longrope_len.json", "w"))

# ---- safetensors and convert-layout ----------------------------------------

from st_read import read_raw as read_st

def permute_bytes(raw, shape, dtype, head_dim, rot, to):
    """Rows of a [heads * head_dim, ...] tensor, the first rot of each head moved."""
    size = {"F32": 4, "F16": 2, "BF16": 2}[dtype]
    rows = shape[0]
    cols = shape[1] if len(shape) == 2 else 1
    a = np.frombuffer(raw, np.uint8).reshape(rows, cols * size)
    out = a.copy()
    half = rot // 2
    for h in range(rows // head_dim):
        base = h * head_dim
        for i in range(half):
            for part in range(2):
                inter, split = base + 2 * i + part, base + i + part * half
                src, dst = (inter, split) if to == "half" else (split, inter)
                out[dst] = a[src]
    return out.tobytes()

def st_equal(a_path, b_path):
    a, b = read_st(a_path), read_st(b_path)
    if a != b:
        diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        print(f"{a_path} and {b_path} differ in {diff[:5]}")
        return 1
    return 0

def check_converted(in_path, out_path, to, head_dim, rot, only_layer=None):
    """q/k weights and biases permuted (in the given layer, or all), the rest identical."""
    a, b = read_st(in_path), read_st(out_path)
    if set(a) != set(b):
        print(f"tensor names differ: {sorted(set(a) ^ set(b))}")
        return 1
    qk = ("wq.weight", "wk.weight", "q_proj.weight", "k_proj.weight", "q_proj.bias",
          "k_proj.bias")
    moved = 0
    for name, (dtype, shape, raw) in a.items():
        expected = raw
        last = ".".join(name.split(".")[-2:])
        in_layer = only_layer is None or f"layers.{only_layer}." in name
        if last in qk and in_layer:
            expected = permute_bytes(raw, shape, dtype, head_dim, rot, to)
            moved += 1
        if b[name] != (dtype, shape, expected):
            print(f"{name}: not as expected (dtype {b[name][0]} shape {b[name][1]})")
            return 1
    if moved == 0:
        print("nothing was permuted")
        return 1
    return 0

def convert_cases(out):
    rng = np.random.default_rng(17)
    DIM, H, HKV = helper.DIM, helper.H, helper.HKV
    D = DIM // H
    tensors = []
    for layer in (0, 1):
        pre = f"model.layers.{layer}.self_attn."
        for name, dtype, shape in [("q_proj.weight", "F32", (H * D, DIM)),
                                   ("k_proj.weight", "BF16", (HKV * D, DIM)),
                                   ("q_proj.bias", "F16", (H * D,)),
                                   ("k_proj.bias", "F32", (HKV * D,)),
                                   ("v_proj.weight", "F16", (HKV * D, DIM)),
                                   ("o_proj.weight", "BF16", (DIM, H * D))]:
            raw, _ = helper.encode(rng.uniform(-1, 1, shape), dtype)
            tensors.append((pre + name, dtype, shape, raw))
    tensors.append(("model.embed_tokens.weight", "F32", (10, DIM),
                    rng.uniform(-1, 1, (10, DIM)).astype(np.float32).tobytes()))
    tensors.append(("model.norm.weight", "F16", (DIM,),
                    rng.uniform(-1, 1, DIM).astype(np.float16).tobytes()))
    tensors.append(("counts", "I32", (3,), np.array([1, 2, 3], np.int32).tobytes()))
    helper.write_safetensors(f"{out}/mixed.safetensors", tensors)
    json.dump({"hidden_size": DIM, "num_attention_heads": H, "num_key_value_heads": HKV},
              open(f"{out}/cv_config.json", "w"))
    json.dump({"num_attention_heads": H, "partial_rotary_factor": 0.5},
              open(f"{out}/cv_partial.json", "w"))
    json.dump({"num_attention_heads": H, "partial_rotary_factor": 0.2},   # int(3.2) = 3
              open(f"{out}/cv_odd.json", "w"))
    ws = helper.weights(1)
    seed = [(n, "F32", w.shape, w.astype(np.float32).tobytes())
            for n, w in zip(helper.SEED_NAMES, ws)]
    helper.write_safetensors(f"{out}/cv_fused.safetensors",
                             seed + [("qkv_proj.weight", "F32", (2, 2), b"\0" * 16)])
    helper.write_safetensors(f"{out}/cv_i32.safetensors",
                             [("wq.weight", "I32", (64, 4), b"\0" * 1024)] + seed[1:])
    helper.write_safetensors(f"{out}/cv_rows.safetensors",
                             [("wq.weight", "F32", (60, 4), b"\0" * 960)] + seed[1:])
    # The seed file with partial rotary, interleaved: the reference for the
    # converted file run with the half layout.
    x = np.load(f"{out}/x.npy").astype(np.float64)
    held = [helper.encode(w, "F32")[1] for w in ws]
    inv, af = inv_freq("default", 8, 1e4, {})
    c, s = tables(np.arange(helper.S), inv, af)
    np.save(f"{out}/cv_ref_partial.npy", attention(x, *held, H, HKV, c, s, "interleaved", 8))

if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "gen":
        for make in (freqs_cases, rope_cases, attention_cases, convert_cases):
            make(sys.argv[2])
    elif cmd == "compare_abs":
        sys.exit(compare_abs(sys.argv[2], sys.argv[3], float(sys.argv[4])))
    elif cmd == "st_equal":
        sys.exit(st_equal(sys.argv[2], sys.argv[3]))
    elif cmd == "converted":
        layer = int(sys.argv[7]) if len(sys.argv) > 7 else None
        sys.exit(check_converted(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]),
                                 int(sys.argv[6]), layer))
EOF
if ! "$PY" "$TMP/rope_helper.py" gen "$TMP"; then fail "rope fixture generation"; summary; fi
cd "$TMP"

# ---- helpers --------------------------------------------------------------
# expect_ok NAME OUTPUT REF TOL -- ARGS...: runs ropeattn ARGS, then compares
# OUTPUT with REF to relative tolerance TOL.
expect_ok() {
    local name=$1 out=$2 ref=$3 tol=$4; shift 5
    rm -f "$out"
    if ! "$RA" "$@" >"$TMP/stdout" 2>"$TMP/stderr"; then
        fail "$name: exit $? ($(head -c 300 "$TMP/stderr"))"; return
    fi
    if [ -s "$TMP/stderr" ]; then
        fail "$name: wrote to stderr: $(head -c 300 "$TMP/stderr")"; return
    fi
    if "$PY" "$TMP/helper.py" compare "$out" "$ref" "$tol"; then pass; else fail "$name"; fi
}

# expect_error NAME OUTPUT -- ARGS...: ropeattn ARGS must fail cleanly and
# leave OUTPUT (may be "-") absent.
expect_error() {
    local name=$1 out=$2; shift 3
    [ "$out" != - ] && rm -f "$out"
    "$RA" "$@" >"$TMP/stdout" 2>"$TMP/stderr"
    local rc=$? lines
    lines=$(wc -l <"$TMP/stderr")
    if [ "$rc" -lt 1 ] || [ "$rc" -gt 127 ]; then fail "$name: exit code $rc"
    elif [ "$lines" -ne 1 ] || ! grep -q '^ropeattn: ' "$TMP/stderr"; then
        fail "$name: expected one 'ropeattn: ' line on stderr, got: $(head -c 400 "$TMP/stderr")"
    elif [ "$out" != - ] && [ -e "$out" ]; then fail "$name: left $out behind"
    elif ls -A "$TMP" | grep -q '^\.ropeattn-'; then fail "$name: left a temporary file: $(ls -A "$TMP")"
    else pass
    fi
}

SEED="--weights seed_F32.safetensors --input x.npy --output y.npy"

# ---- attention --------------------------------------------------------------
expect_ok "attention f32 flash" y.npy ref_F32.npy 1e-4 -- attention $SEED --n-heads 4 --theta 10000
expect_ok "attention f32 reference path" y.npy ref_F32.npy 1e-4 -- \
    attention $SEED --n-heads 4 --theta 10000 --path reference
expect_ok "attention f32, 1 thread" y.npy ref_F32.npy 1e-4 -- \
    attention $SEED --n-heads 4 --theta 10000 --n-kv-heads 2 --threads 1
expect_ok "attention f16 weights" y.npy ref_F16.npy 1e-4 -- \
    attention --weights seed_F16.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_ok "attention bf16 weights" y.npy ref_BF16.npy 1e-4 -- \
    attention --weights seed_BF16.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_ok "attention --start-pos 7 --theta 500000" y.npy ref_start7_theta500k.npy 1e-4 -- \
    attention $SEED --n-heads 4 --start-pos 7 --theta 500000

# A float64 input is rounded to the nearest float32, as F64 weights are:
# x + 0.6 ulp (each element) gives, bit for bit, the Y of the float32 one
# ulp away from x (truncation would give x's); --grad-output too.
"$PY" - <<'PYEOF'
import numpy as np
x = np.load("x.npy")
step = np.spacing(x)  # one ulp away from zero
np.save("x_next.npy", (x + step).astype(np.float32))
np.save("x64.npy", x.astype(np.float64) + 0.6 * step.astype(np.float64))
np.save("rope_x64.npy", np.load("rope_x.npy").astype(np.float64))
huge = x.astype(np.float64); huge[1, 2, 3] = -1e39
np.save("x64_huge.npy", huge)
PYEOF
"$RA" attention --weights seed_F32.safetensors --input x_next.npy --output y_next.npy --n-heads 4 \
    --theta 10000
expect_ok "attention on float64 X: rounded to nearest" y.npy y_next.npy 0 -- \
    attention --weights seed_F32.safetensors --input x64.npy --output y.npy --n-heads 4 \
    --theta 10000
expect_ok "attention --layout half on seed names" y.npy ref_half.npy 1e-4 -- \
    attention $SEED --n-heads 4 --theta 10000 --layout half
"$PY" "$TMP/helper.py" slice0 ref_F32.npy ref_F32_0.npy
expect_ok "attention 2-D input is batch 1" y2.npy ref_F32_0.npy 1e-4 -- \
    attention --weights seed_F32.safetensors --input x2d.npy --output y2.npy --n-heads 4 \
    --theta 10000

# Hugging Face names, permuted rows, half layout by default: same output as
# the seed's names.
"$RA" attention $SEED --n-heads 4 --theta 10000 2>/dev/null && mv y.npy y_seed.npy
expect_ok "attention HF names + config = seed names" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf.safetensors --input x.npy --output y.npy --config llama.json
expect_ok "attention HF self_attn. names" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf_bare.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000 \
    --layout half
expect_ok "attention HF --layer 1 of 2" y.npy ref_layer1.npy 1e-4 -- \
    attention --weights hf_2layers.safetensors --input x.npy --output y.npy --n-heads 4 \
    --theta 10000 --layer 1 --layout half
expect_ok "attention sharded checkpoint, --layer 0 over two shards" y.npy y_seed.npy 1e-5 -- \
    attention --weights sharded/model.safetensors.index.json --input x.npy --output y.npy \
    --config llama.json --layer 0
expect_ok "attention sharded checkpoint, --layer 1" y.npy ref_layer1.npy 1e-4 -- \
    attention --weights sharded/model.safetensors.index.json --input x.npy --output y.npy \
    --n-heads 4 --theta 10000 --layer 1 --layout half
expect_ok "attention HF --layer 0 of 2" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf_2layers.safetensors --input x.npy --output y.npy --config llama.json \
    --layer 0
expect_ok "attention rope_theta from config" y.npy ref_start7_theta500k.npy 1e-4 -- \
    attention --weights hf.safetensors --input x.npy --output y.npy --config config_theta.json \
    --layout half
expect_ok "attention flags override config" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf.safetensors --input x.npy --output y.npy --config config_theta.json \
    --theta 10000 --n-heads 4 --layout half
# A sliding window as long as the input, or one the config turns off or
# gives other layers, changes nothing.
expect_ok "attention sliding_window = seq" y.npy y_seed.npy 1e-5 -- attention $SEED \
    --config cw_exact.json
expect_ok "attention use_sliding_window false" y.npy y_seed.npy 1e-5 -- attention $SEED \
    --config cw_off.json
expect_ok "attention window from max_window_layers 1, --layer 0" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf_2layers.safetensors --input x.npy --output y.npy \
    --config cw_from1.json --layer 0 --layout half
expect_ok "attention layer_types full, --layer 0" y.npy y_seed.npy 1e-5 -- \
    attention --weights hf_2layers.safetensors --input x.npy --output y.npy \
    --config cw_types.json --layer 0 --layout half

# ---- attention through a KV cache (--prefill) ------------------------------
# The first P tokens of each sequence as one prefill, the rest one decode step
# at a time: the same Y as the layer without a cache (y_seed.npy), to float32
# rounding with an f32 cache, and to the cache's rounding with f16 or bf16.
for P in 1 3 5; do
    expect_ok "attention --prefill $P (of 5), f32 cache = no cache" y.npy y_seed.npy 5e-6 -- \
        attention $SEED --n-heads 4 --theta 10000 --prefill $P
done
expect_ok "attention --prefill 2 --cache-dtype f32, 1 thread" y.npy y_seed.npy 5e-6 -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --cache-dtype f32 --threads 1
expect_ok "attention --prefill 2 --cache-dtype f16" y.npy y_seed.npy 5e-3 -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --cache-dtype f16
expect_ok "attention --prefill 1 --cache-dtype bf16" y.npy y_seed.npy 3e-2 -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 1 --cache-dtype bf16
expect_ok "attention --prefill 4 --cache-dtype bf16" y.npy y_seed.npy 3e-2 -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 4 --cache-dtype bf16
expect_ok "attention --prefill 2 --cache-dtype int8" y.npy y_seed.npy 3e-2 -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --cache-dtype int8
expect_ok "attention --prefill 1 --cache-dtype fp8" y.npy y_seed.npy 1.5e-1 -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 1 --cache-dtype fp8 --cache-scale 0.5
expect_ok "attention --prefill 2, 2-D input" y2.npy ref_F32_0.npy 1e-4 -- \
    attention --weights seed_F32.safetensors --input x2d.npy --output y2.npy --n-heads 4 \
    --theta 10000 \
    --prefill 2
# --stats: the prefill's and the decode steps' tokens per second on stdout
# (x.npy: 2 sequences of 5 tokens); --quiet; no progress line off a terminal.
expect_ok "attention --prefill 2 --stats --quiet" y.npy y_seed.npy 5e-6 -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --stats --quiet
if grep -qE '^prefill: 4 tokens in [0-9.]+ s, [0-9]+ tokens/s$' "$TMP/stdout" &&
    grep -qE '^decode: 3 steps of 2 tokens in [0-9.]+ s, [0-9]+ tokens/s$' "$TMP/stdout" &&
    [ "$(wc -l <"$TMP/stdout")" -eq 2 ]; then pass
else fail "attention --stats: $(head -c 300 "$TMP/stdout")"; fi
expect_error "attention --stats without --prefill" y.npy -- attention $SEED --n-heads 4 \
    --theta 10000 --stats

# The progress line, on a terminal only, after RA_PROGRESS_DELAY seconds
# (0 here, so that no check hangs on the machine's speed): a decode of 300
# tokens with stderr on a pseudo-terminal draws "\rattention --prefill: N of
# 300 tokens, ..." and clears it; --quiet draws nothing.
"$PY" -c 'import numpy as np
for name, seed in ("x_long.npy", 3), ("dy_long.npy", 5):
    np.save(name, np.random.default_rng(seed).uniform(-1, 1, (1, 300, 64)).astype(np.float32))'
cat >"$TMP/on_tty.py" <<'EOF'
import os, pty, subprocess, sys
# Runs argv[1:] with stderr on a pseudo-terminal; prints what it wrote there.
master, slave = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave)
os.close(slave)
data = b""
while True:
    try:
        chunk = os.read(master, 4096)
    except OSError:  # EIO: the child closed its end
        break
    if not chunk:
        break
    data += chunk
sys.stdout.write(repr(data.decode()))
sys.exit(p.wait())
EOF
LONG="attention --weights seed_F32.safetensors --input x_long.npy --threads 1"
LONG="$LONG --n-heads 4 --theta 10000"
if RA_PROGRESS_DELAY=0 "$PY" "$TMP/on_tty.py" "$RA" $LONG --prefill 1 --output y_long.npy \
    >"$TMP/tty" &&
    grep -qE 'attention --prefill: [0-9]+ of 300 tokens, [0-9.]+ s, [0-9]+ tokens/s' "$TMP/tty" &&
    grep -qF "\\r\\x1b[K'" "$TMP/tty"; then pass
else fail "attention --prefill on a terminal: no progress line: $(head -c 300 "$TMP/tty")"; fi
if RA_PROGRESS_DELAY=0 "$PY" "$TMP/on_tty.py" "$RA" $LONG --prefill 1 --output y_quiet.npy \
    --quiet >"$TMP/tty" && [ "$(cat "$TMP/tty")" = "''" ]; then pass
else fail "attention --prefill --quiet on a terminal wrote: $(head -c 300 "$TMP/tty")"; fi
# --grads: the forward's 300 tokens, then the backward's.
if RA_PROGRESS_DELAY=0 "$PY" "$TMP/on_tty.py" "$RA" $LONG --output y_long.npy \
    --grad-output dy_long.npy --grads g_long.safetensors >"$TMP/tty" &&
    grep -qE 'attention --grads: 300 of 600 tokens, [0-9.]+ s, [0-9]+ tokens/s' "$TMP/tty"
then pass
else fail "attention --grads on a terminal: no progress line: $(head -c 300 "$TMP/tty")"; fi
# The default delay is a second: this run ends well before it.
if "$PY" "$TMP/on_tty.py" "$RA" attention $SEED --n-heads 4 --theta 10000 --prefill 1 >"$TMP/tty" &&
    [ "$(cat "$TMP/tty")" = "''" ]; then pass
else fail "attention --prefill, 5 tokens, on a terminal wrote: $(head -c 300 "$TMP/tty")"; fi
for delay in -1 x nan 1e7; do
    RA_PROGRESS_DELAY=$delay "$RA" --version >/dev/null 2>"$TMP/stderr"; rc=$?
    if [ "$rc" -eq 2 ] && [ "$(wc -l <"$TMP/stderr")" -eq 1 ] &&
        grep -q "^ropeattn: RA_PROGRESS_DELAY must be" "$TMP/stderr"; then pass
    else fail "RA_PROGRESS_DELAY='$delay': exit $rc, stderr: $(cat "$TMP/stderr")"; fi
done
rm -f x_long.npy dy_long.npy y_long.npy y_quiet.npy g_long.safetensors

# Positions: --start-pos, and per-row --positions (llama3), reach every call.
"$RA" attention $SEED --n-heads 4 --start-pos 7 --theta 500000 2>/dev/null && mv y.npy y_s7.npy
expect_ok "attention --prefill 1 --start-pos 7 = no cache" y.npy y_s7.npy 5e-6 -- \
    attention $SEED --n-heads 4 --start-pos 7 --theta 500000 --prefill 1
"$RA" attention $SEED --config at_llama3.json --positions at_pos.npy 2>/dev/null &&
    mv y.npy y_pos.npy
expect_ok "attention --prefill 2 --positions [B, S] = no cache" y.npy y_pos.npy 5e-6 -- \
    attention $SEED --config at_llama3.json --positions at_pos.npy --prefill 2
expect_ok "attention --prefill 2 --positions [B, S] = numpy" y.npy at_ref_llama3.npy 1e-4 -- \
    attention $SEED --config at_llama3.json --positions at_pos.npy --prefill 2
expect_ok "attention --prefill 3, longrope past the original length (HF names)" y.npy \
    at_ref_longrope_40.npy 1e-4 -- attention --weights hf_plain.safetensors --input x.npy \
    --output y.npy --config at_longrope.json --start-pos 40 --prefill 3 --layout half

# expect_usage NAME PATTERN -- ARGS...: ropeattn ARGS must exit 2 with one
# stderr line matching PATTERN, and write no y.npy.
expect_usage() {
    local name=$1 pattern=$2; shift 3
    rm -f y.npy
    "$RA" "$@" >"$TMP/stdout" 2>"$TMP/stderr"
    local rc=$?
    if [ "$rc" -ne 2 ]; then fail "$name: exit $rc, expected 2 ($(head -c 300 "$TMP/stderr"))"
    elif [ "$(wc -l <"$TMP/stderr")" -ne 1 ] || ! grep -q "^ropeattn: .*$pattern" "$TMP/stderr"
    then fail "$name: expected one 'ropeattn: ...$pattern' line, got: $(head -c 300 "$TMP/stderr")"
    elif [ -e y.npy ]; then fail "$name: left y.npy behind"
    else pass
    fi
}
# an option with a value given twice: which was meant is not known
expect_usage "attention --output twice" "attention: --output is given twice" -- \
    attention $SEED --n-heads 4 --theta 10000 --output other.npy
expect_usage "rope --theta twice, once with =" "rope: --theta is given twice" -- \
    rope --input x.npy --output y.npy --theta 10000 --theta=500000
expect_usage "attention --prefill 0" "--prefill must be an integer from 1" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 0
expect_usage "attention --prefill seq + 1" "--prefill 6 is more than the 5 tokens" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 6
expect_usage "attention --prefill abc" "--prefill must be an integer.*'abc'" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill abc
expect_usage "attention --cache-dtype f64" "--cache-dtype must be f32, f16, bf16, int8 or fp8" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --cache-dtype f64
expect_usage "attention --cache-scale with int8" "--cache-scale needs --cache-dtype fp8" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --cache-dtype int8 --cache-scale 2
expect_usage "attention --cache-scale 0" "--cache-scale" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --cache-dtype fp8 --cache-scale 0
expect_usage "attention --cache-scale 1e-50 (0 as a float)" "must be a normal float" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --cache-dtype fp8 --cache-scale 1e-50
expect_usage "attention --cache-scale 1e39 (448 s beyond a float)" "must be a normal float" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --cache-dtype fp8 --cache-scale 1e39
expect_usage "attention --cache-dtype without --prefill" "--cache-dtype needs --prefill" -- \
    attention $SEED --n-heads 4 --theta 10000 --cache-dtype f16
expect_usage "attention --prefill with --path reference" "--prefill runs the flash path" -- \
    attention $SEED --n-heads 4 --theta 10000 --prefill 2 --path reference

# ---- attention gradients (--grad-output, --grads) ---------------------------
# The backward of L = sum(Y * DY), against the seed's module differentiated by
# hand in float64 numpy (tests/fixtures holds the PyTorch autograd check).
cat >"$TMP/grad_helper.py" <<'EOF'
"""Gradient fixtures and checks for test_cli.sh (numpy only)."""
import os, sys
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import helper
from helper import B, S, DIM, H, HKV

def backward(x, wq, wk, wv, wo, dy, h, hkv, start=0, theta=10000.0, layout="interleaved"):
    """dL/dx and dL/dw of L = sum(y * dy), y = helper.seed_attention(...):
    each forward line differentiated in reverse."""
    b, s, dim = x.shape; d = dim // h; rep = h // hkv
    q = helper.rope((x @ wq.T).reshape(b, s, h, d), start, theta, layout)
    k = helper.rope((x @ wk.T).reshape(b, s, hkv, d), start, theta, layout)
    v = (x @ wv.T).reshape(b, s, hkv, d)
    qh, kh, vh = (t.transpose(0, 2, 1, 3) for t in (q, np.repeat(k, rep, 2), np.repeat(v, rep, 2)))
    scores = qh @ kh.transpose(0, 1, 3, 2) / np.sqrt(d) + np.triu(np.full((s, s), -np.inf), 1)
    p = np.exp(scores - scores.max(-1, keepdims=True)); p /= p.sum(-1, keepdims=True)
    out = (p @ vh).transpose(0, 2, 1, 3).reshape(b, s, h * d)
    # y = out wo^T
    dwo = dy.reshape(-1, dim).T @ out.reshape(-1, h * d)
    dout = (dy @ wo).reshape(b, s, h, d).transpose(0, 2, 1, 3)
    # out = p v;  p = softmax(q k^T / sqrt(d))
    dp = dout @ vh.transpose(0, 1, 3, 2)
    dvh = p.transpose(0, 1, 3, 2) @ dout
    ds = p * (dp - (p * dp).sum(-1, keepdims=True)) / np.sqrt(d)
    dqh, dkh = ds @ kh, ds.transpose(0, 1, 3, 2) @ qh
    # repeat_kv: sum each group; heads back to [b, s, heads, d]
    dk = dkh.reshape(b, hkv, rep, s, d).sum(2).transpose(0, 2, 1, 3)
    dv = dvh.reshape(b, hkv, rep, s, d).sum(2).transpose(0, 2, 1, 3)
    dq = dqh.transpose(0, 2, 1, 3)
    # rope: its transpose is the inverse rotation
    dq = helper.rope(dq, start, theta, layout, inverse=True).reshape(b * s, h * d)
    dk = helper.rope(dk, start, theta, layout, inverse=True).reshape(b * s, hkv * d)
    dv = dv.reshape(b * s, hkv * d)
    xf = x.reshape(-1, dim)
    dx = (dq @ wq + dk @ wk + dv @ wv).reshape(x.shape)
    return dx, [dq.T @ xf, dk.T @ xf, dv.T @ xf, dwo]

from st_read import read_f32 as read_safetensors

def gen(out):
    rng = np.random.default_rng(11)
    dy = rng.uniform(-1, 1, (B, S, DIM)).astype(np.float32)
    np.save(f"{out}/dy.npy", dy)
    np.save(f"{out}/dy2d.npy", dy[0])
    np.save(f"{out}/dy_wrong.npy", dy[:, :-1])
    np.save(f"{out}/dy_f64.npy", dy.astype(np.float64))
    x = np.load(f"{out}/x.npy").astype(np.float64)
    ws = [helper.encode(w, "F32")[1] for w in helper.weights(1)]
    cases = {"seed": (x, dict(), helper.SEED_NAMES, None),
             "seed2d": (x[:1], dict(), helper.SEED_NAMES, None),
             "start7": (x, dict(start=7, theta=500000.0), helper.SEED_NAMES, None),
             "hf": (x, dict(), helper.HF_NAMES, "model.layers.0.self_attn.")}
    for name, (xc, kw, names, prefix) in cases.items():
        dx, dws = backward(xc, *ws, dy[: xc.shape[0]].astype(np.float64), H, HKV, **kw)
        if prefix:  # HF weights: wq, wk rows permuted, and so their gradients
            dws = [helper.permute_rows(dws[0], H), helper.permute_rows(dws[1], HKV)] + dws[2:]
            names = [prefix + n for n in names]
        ref = {"x": dx[0] if name == "seed2d" else dx}
        ref.update(zip(names, dws))
        np.savez(f"{out}/gref_{name}.npz", **ref)

def check(path, ref_path, tol):
    got, ref = read_safetensors(path), dict(np.load(ref_path))
    if sorted(got) != sorted(ref):
        print(f"{path}: tensors {sorted(got)}, expected {sorted(ref)}"); return 1
    for name, want in ref.items():
        g = got[name]
        if g.shape != want.shape or not np.all(np.isfinite(g)):
            print(f"{path}: {name} has shape {g.shape}, expected {want.shape}"); return 1
        err = np.max(np.abs(g - want)) / np.max(np.abs(want))
        if err > tol:
            print(f"{path}: {name} rel err {err:.3g} > {tol:g}"); return 1
    return 0

if __name__ == "__main__":
    if sys.argv[1] == "gen": gen(sys.argv[2])
    elif sys.argv[1] == "check": sys.exit(check(sys.argv[2], sys.argv[3], float(sys.argv[4])))
EOF
if ! "$PY" "$TMP/grad_helper.py" gen "$TMP"; then fail "gradient fixture generation"; fi

# expect_grads NAME REF -- ARGS...: ropeattn ARGS must succeed silently and
# write g.safetensors with exactly the tensors of gref_REF.npz, F32, to 1e-4.
expect_grads() {
    local name=$1 ref=$2; shift 3
    rm -f y.npy y2.npy g.safetensors
    if ! "$RA" "$@" >"$TMP/stdout" 2>"$TMP/stderr"; then
        fail "$name: exit $? ($(head -c 300 "$TMP/stderr"))"; return
    fi
    if [ -s "$TMP/stderr" ]; then fail "$name: wrote to stderr: $(head -c 300 "$TMP/stderr")"
    elif ! "$PY" "$TMP/grad_helper.py" check g.safetensors "gref_$ref.npz" 1e-4; then fail "$name"
    else pass
    fi
}
GRADS="--grad-output dy.npy --grads g.safetensors"
expect_grads "attention --grads, seed names, flash" seed -- attention $SEED --n-heads 4 \
    --theta 10000 $GRADS
expect_grads "attention --grads, DY float64 (rounded to float32)" seed -- \
    attention $SEED --n-heads 4 --theta 10000 --grad-output dy_f64.npy --grads g.safetensors
expect_ok "attention --grads: Y is the inference Y" y.npy ref_F32.npy 1e-4 -- \
    attention $SEED --n-heads 4 --theta 10000 $GRADS
expect_grads "attention --grads, reference path, 1 thread" seed -- \
    attention $SEED --n-heads 4 --theta 10000 $GRADS --path reference --threads 1
expect_grads "attention --grads, 2-D input" seed2d -- attention --weights seed_F32.safetensors \
    --input x2d.npy --output y2.npy --n-heads 4 --theta 10000 --grad-output dy2d.npy \
    --grads g.safetensors
expect_grads "attention --grads --start-pos 7 --theta 500000" start7 -- \
    attention $SEED --n-heads 4 --start-pos 7 --theta 500000 $GRADS
expect_grads "attention --grads, HF names (gradients under q_proj.weight ...)" hf -- \
    attention --weights hf.safetensors --input x.npy --output y.npy --config llama.json $GRADS

# Refused: exit 1, one message, and neither Y nor G written.
expect_grads_error() {
    local name=$1; shift 2
    rm -f y.npy
    expect_error "$name" g.safetensors -- "$@"
    if [ -e y.npy ]; then fail "$name: left y.npy behind"; else pass; fi
}
expect_grads_error "attention: DY of the wrong shape" -- attention $SEED --n-heads 4 --theta 10000 \
    --grad-output dy_wrong.npy --grads g.safetensors
if grep -q "dy_wrong.npy has shape \[2, 4, 64\].*\[2, 5, 64\]" "$TMP/stderr"; then pass
else fail "attention: DY shape message: $(cat "$TMP/stderr")"
fi
expect_grads_error "attention: DY missing" -- attention $SEED --n-heads 4 --theta 10000 \
    --grad-output nope.npy --grads g.safetensors
rm -f y.npy
expect_error "attention: --grads folder missing" nodir/g.safetensors -- attention $SEED \
    --n-heads 4 --theta 10000 --grad-output dy.npy --grads nodir/g.safetensors
if [ -e y.npy ]; then fail "attention: --grads folder missing: left y.npy behind"; else pass; fi
expect_usage "attention --grads without --grad-output" "--grads needs --grad-output" -- \
    attention $SEED --n-heads 4 --theta 10000 --grads g.safetensors
expect_usage "attention --grad-output without --grads" "--grad-output needs --grads" -- \
    attention $SEED --n-heads 4 --theta 10000 --grad-output dy.npy
expect_usage "attention --grads with --prefill" "--prefill (the KV-cache generator) has no" -- \
    attention $SEED --n-heads 4 --theta 10000 $GRADS --prefill 2
expect_usage "attention --grads = --output" "--output y.npy and --grads y.npy name the same file" -- \
    attention $SEED --n-heads 4 --theta 10000 --grad-output dy.npy --grads y.npy
cp seed_F32.safetensors seed_keep.safetensors
expect_usage "attention --grads = --weights" "--grads seed_keep.safetensors and --weights seed_keep.safetensors name the same file" -- \
    attention --weights seed_keep.safetensors --input x.npy --output y.npy --n-heads 4 \
    --theta 10000 \
    --grad-output dy.npy --grads seed_keep.safetensors
if cmp -s seed_F32.safetensors seed_keep.safetensors; then pass
else fail "attention --grads = --weights: the weights file was changed"
fi
expect_usage "attention --grads = --input" "--grads x.npy and --input x.npy name the same file" -- \
    attention $SEED --n-heads 4 --theta 10000 --grad-output dy.npy --grads x.npy
expect_usage "convert-layout --output = --weights" "--output seed_keep.safetensors and --weights" -- \
    convert-layout --weights seed_keep.safetensors --output seed_keep.safetensors --to half
expect_usage "attention --grads = --grad-output" "--grads dy.npy and --grad-output dy.npy name the same" -- \
    attention $SEED --n-heads 4 --theta 10000 --grad-output dy.npy --grads dy.npy
expect_usage "attention --grads = ./--input" "--grads ./x.npy and --input x.npy name the same file" -- \
    attention $SEED --n-heads 4 --theta 10000 --grad-output dy.npy --grads ./x.npy

# ---- rope and freqs ---------------------------------------------------------
expect_ok "rope interleaved" r.npy rope_ref_interleaved.npy 1e-5 -- \
    rope --input rope_x.npy --output r.npy --start-pos 3
expect_ok "rope half" r.npy rope_ref_half.npy 1e-5 -- \
    rope --input rope_x.npy --output r.npy --start-pos 3 --layout half --threads 1
expect_ok "rope on float64 X" r.npy rope_ref_half.npy 1e-5 -- \
    rope --input rope_x64.npy --output r.npy --start-pos 3 --layout half --threads 1
expect_ok "rope far positions" r.npy rope_ref_far.npy 1e-5 -- \
    rope --input rope_x.npy --output r.npy --start-pos 1000000 --theta 500000 --layout=half
"$PY" -c 'import numpy as np; np.save("rope_x64.npy", np.load("rope_x.npy").astype(np.float64))'
"$RA" rope --input rope_x.npy --output r.npy --start-pos 5 --layout half 2>/dev/null
expect_ok "rope --inverse undoes rope" back.npy rope_x64.npy 1e-6 -- \
    rope --input r.npy --output back.npy --start-pos 5 --layout half --inverse
expect_ok "freqs cos" c.npy cos_ref.npy 1e-6 -- \
    freqs --head-dim 16 --end 100 --cos c.npy --sin s.npy
if "$PY" "$TMP/helper.py" compare s.npy sin_ref.npy 1e-6; then pass; else fail "freqs sin"; fi

# Every rope type against transformers' formulas in float64, 1e-6 absolute,
# at positions up to 2^20 - 1 (int32 and int64 position files).
while read -r name; do
    mapfile -t args <"args_$name"
    rm -f "c_$name.npy" "s_$name.npy"
    if ! "$RA" freqs "${args[@]}" --cos "c_$name.npy" --sin "s_$name.npy" \
        >"$TMP/stdout" 2>"$TMP/stderr"; then
        fail "freqs $name: exit $? ($(head -c 300 "$TMP/stderr"))"; continue
    fi
    if "$PY" "$TMP/rope_helper.py" compare_abs "c_$name.npy" "cref_$name.npy" 1e-6 &&
        "$PY" "$TMP/rope_helper.py" compare_abs "s_$name.npy" "sref_$name.npy" 1e-6; then pass
    else fail "freqs $name"; fi
done <freqs_cases

# rope: --positions [S] shared by the batch (any order, repeats), and [B, S]
# with partial rotary YaRN from a config, half layout.
expect_ok "rope --positions [S] int64" r.npy rp_ref_shared.npy 1e-5 -- \
    rope --input rp_x.npy --output r.npy --positions rp_pos_s.npy
expect_ok "rope --positions [B, S] int32, yarn, partial rotary, half" r.npy rp_ref_batch.npy \
    1e-5 -- rope --input rp_x2.npy --output r.npy --positions rp_pos_bs.npy \
    --config rp_cfg.json --layout half
"$RA" rope --input rp_x2.npy --output r1.npy --positions rp_pos_bs.npy --config rp_cfg_af1.json \
    --layout half 2>/dev/null
expect_ok "rope --inverse with positions undoes rope" back.npy rp_x2_64.npy 1e-6 -- \
    rope --input r1.npy --output back.npy --positions rp_pos_bs.npy --config rp_cfg_af1.json \
    --layout half --inverse

# attention: partial rotary from config.json (HF names, rotate_half on the
# first rotary_dim features), llama3 with --positions, longrope + partial.
expect_ok "attention partial_rotary_factor 0.5 (config)" y.npy at_ref_partial.npy 1e-4 -- \
    attention --weights hf_plain.safetensors --input x.npy --output y.npy --config at_partial.json \
    --layout half
expect_ok "attention llama3 config + --positions [B, S]" y.npy at_ref_llama3.npy 1e-4 -- \
    attention $SEED --config at_llama3.json --positions at_pos.npy
expect_ok "attention longrope + partial rotary, short factors" y.npy at_ref_longrope_0.npy \
    1e-4 -- attention --weights hf_plain.safetensors --input x.npy --output y.npy \
    --config at_longrope.json --layout half
expect_ok "attention longrope, long factors past the original length" y.npy \
    at_ref_longrope_40.npy 1e-4 -- attention --weights hf_plain.safetensors --input x.npy \
    --output y.npy --config at_longrope.json --start-pos 40 --layout half

# convert-layout: permuted rows exactly, everything else byte for byte, and a
# round trip that reproduces the input.
for dtype in F32 F16 BF16; do
    rm -f h_$dtype.safetensors i_$dtype.safetensors
    if "$RA" convert-layout --weights seed_$dtype.safetensors --output h_$dtype.safetensors \
        --to half --n-heads 4 2>"$TMP/stderr" &&
        "$RA" convert-layout --weights h_$dtype.safetensors --output i_$dtype.safetensors \
        --to interleaved --n-heads 4 --n-kv-heads 2 2>>"$TMP/stderr" &&
        "$PY" "$TMP/rope_helper.py" converted seed_$dtype.safetensors h_$dtype.safetensors \
        half 16 16 &&
        "$PY" "$TMP/rope_helper.py" st_equal seed_$dtype.safetensors i_$dtype.safetensors; then
        pass
    else fail "convert-layout $dtype round trip: $(head -c 300 "$TMP/stderr")"; fi
done
rm -f m_half.safetensors m_back.safetensors m_l1.safetensors
if "$RA" convert-layout --weights mixed.safetensors --output m_half.safetensors --to half \
    --config cv_config.json 2>"$TMP/stderr" &&
    "$PY" "$TMP/rope_helper.py" converted mixed.safetensors m_half.safetensors half 16 16 &&
    "$RA" convert-layout --weights m_half.safetensors --output m_back.safetensors \
    --to interleaved --config cv_config.json 2>>"$TMP/stderr" &&
    "$PY" "$TMP/rope_helper.py" st_equal mixed.safetensors m_back.safetensors; then pass
else fail "convert-layout: every layer, biases, other dtypes copied: $(head -c 300 "$TMP/stderr")"
fi
if "$RA" convert-layout --weights mixed.safetensors --output m_l1.safetensors --to interleaved \
    --n-heads 4 --layer 1 2>"$TMP/stderr" &&
    "$PY" "$TMP/rope_helper.py" converted mixed.safetensors m_l1.safetensors interleaved 16 16 1
then pass; else fail "convert-layout --layer 1: $(head -c 300 "$TMP/stderr")"; fi

# Equivalence: attention on the converted file with the other layout.
"$RA" convert-layout --weights seed_F32.safetensors --output to_half.safetensors --to half \
    --n-heads 4 2>/dev/null
expect_ok "attention: seed file converted to half, run half = seed" y.npy y_seed.npy 1e-5 -- \
    attention --weights to_half.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000 \
    --layout half
"$RA" convert-layout --weights hf.safetensors --output to_inter.safetensors --to interleaved \
    --config llama.json 2>/dev/null
expect_ok "attention: HF file converted to interleaved, run interleaved = seed" y.npy \
    y_seed.npy 1e-5 -- attention --weights to_inter.safetensors --input x.npy --output y.npy \
    --config llama.json --layout interleaved
"$RA" convert-layout --weights seed_F32.safetensors --output to_half_p.safetensors --to half \
    --config cv_partial.json 2>/dev/null
if "$PY" "$TMP/rope_helper.py" converted seed_F32.safetensors to_half_p.safetensors half 16 8
then pass; else fail "convert-layout partial rotary moves the first rotary_dim rows only"; fi
expect_ok "attention: partial rotary, original interleaved" y.npy cv_ref_partial.npy 1e-4 -- \
    attention $SEED --config cv_partial.json
expect_ok "attention: partial rotary, converted to half = interleaved original" y.npy \
    cv_ref_partial.npy 1e-4 -- attention --weights to_half_p.safetensors --input x.npy \
    --output y.npy --config cv_partial.json --layout half

# ---- the config.json beside the weights --------------------------------------
# Without --config, the config.json in the weights' folder is read, as
# transformers' from_pretrained reads it; a folder is a checkpoint
# (model.safetensors first, then model.safetensors.index.json); with no config
# at all, the rope must be given: never theta 10000 by default.
mkdir -p ck500k ck_both ck_empty cvp
cp hf.safetensors ck500k/model.safetensors
printf '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
 "num_key_value_heads": 2, "rope_theta": 500000.0}' >ck500k/config.json
cp hf.safetensors ck_both/model.safetensors
printf '{"weight_map": {"model.layers.0.self_attn.q_proj.weight": "absent.safetensors"}}' \
    >ck_both/model.safetensors.index.json
printf '{"rope_theta": 500000.0}' >ck_both/config.json
cp seed_F32.safetensors cvp/model.safetensors
cp cv_partial.json cvp/config.json
"$RA" attention --weights ck500k/model.safetensors --config ck500k/config.json --input x.npy \
    --output y_500k.npy 2>/dev/null
expect_ok "attention: config.json beside the weights (rope_theta 500000)" y.npy \
    ref_start7_theta500k.npy 1e-4 -- attention --weights ck500k/model.safetensors \
    --input x.npy --output y.npy --n-heads 4
expect_ok "attention: config.json beside = --config" y.npy y_500k.npy 0 -- \
    attention --weights ck500k/model.safetensors --input x.npy --output y.npy
expect_ok "attention: a checkpoint folder as --weights" y.npy y_500k.npy 0 -- \
    attention --weights ck500k --input x.npy --output y.npy
expect_ok "attention: a folder's model.safetensors before its index" y.npy y_500k.npy 0 -- \
    attention --weights ck_both/ --input x.npy --output y.npy --n-heads 4 --layout half
expect_ok "attention: a folder's sharded index" y.npy ref_layer1.npy 1e-4 -- \
    attention --weights sharded --input x.npy --output y.npy --n-heads 4 --theta 10000 --layer 1 \
    --layout half
expect_ok "attention: no config, the rope from --rope-parameters' rope_theta" y.npy \
    ref_F32.npy 1e-4 -- attention $SEED --n-heads 4 \
    --rope-parameters '{"rope_type": "default", "rope_theta": 10000}'
expect_usage "attention: no config and no --theta" \
    "attention: no config.json beside seed_F32.safetensors: give --config, or the rope: --theta" \
    -- attention $SEED --n-heads 4
expect_usage "attention: no config, --rope-parameters without rope_theta" \
    "no config.json beside seed_F32.safetensors" -- attention $SEED --n-heads 4 \
    --rope-parameters '{"rope_type": "linear", "factor": 2}'
expect_error "attention: no config, Hugging Face names without --layout" y.npy -- \
    attention --weights hf_bare.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000
if grep -q "no config names a model_type: give the layout (--layout" "$TMP/stderr"; then pass
else fail "attention: HF names without a family or --layout: $(cat "$TMP/stderr")"; fi
expect_usage "attention: a folder without config.json" "no config.json in sharded:" -- \
    attention --weights sharded --input x.npy --output y.npy --n-heads 4 --layer 1
expect_usage "attention: --output is the config.json beside the weights" \
    "the config.json beside --weights ck500k/config.json name the same file" -- \
    attention --weights ck500k --input x.npy --output ck500k/config.json
expect_error "attention: a folder without a checkpoint" y.npy -- \
    attention --weights ck_empty --input x.npy --output y.npy --n-heads 4 --theta 10000
if grep -q "ck_empty: a folder with neither model.safetensors nor" "$TMP/stderr"; then pass
else fail "attention: a folder without a checkpoint: $(cat "$TMP/stderr")"; fi
# a refused run leaves the files it would have written as they were
printf 'kept' >y_kept.npy
printf 'kept' >g_kept.safetensors
if "$RA" attention --weights seed_F32.safetensors --input x.npy --output y_kept.npy \
    --n-heads 4 --grad-output x.npy --grads g_kept.safetensors 2>"$TMP/stderr"; then
    fail "attention: a refused run exited 0"
elif ! grep -q "no config.json beside" "$TMP/stderr"; then
    fail "attention: refused for another reason: $(cat "$TMP/stderr")"
elif [ "$(cat y_kept.npy g_kept.safetensors)" != keptkept ] || ls -A | grep -q '^\.ropeattn-'
then fail "attention: a refused run changed its outputs"; else pass; fi
# convert-layout reads the config beside its input too: partial_rotary_factor
# 0.5 moves the first 8 of each head's 16 rows, with --n-heads or without.
rm -f cvp_half.safetensors cvp_dir.safetensors
if "$RA" convert-layout --weights cvp/model.safetensors --output cvp_half.safetensors \
    --to half --n-heads 4 2>"$TMP/stderr" &&
    "$PY" "$TMP/rope_helper.py" converted seed_F32.safetensors cvp_half.safetensors half 16 8 &&
    "$RA" convert-layout --weights cvp --output cvp_dir.safetensors --to half \
    2>>"$TMP/stderr" &&
    "$PY" "$TMP/rope_helper.py" st_equal cvp_half.safetensors cvp_dir.safetensors; then pass
else fail "convert-layout: the config.json beside the weights: $(head -c 300 "$TMP/stderr")"; fi

# ---- help, version, demo, bench --------------------------------------------
for cmd in "" attention rope freqs families convert-layout; do
    if "$RA" $cmd --help >"$TMP/stdout" 2>"$TMP/stderr" && grep -q usage "$TMP/stdout" &&
        [ ! -s "$TMP/stderr" ]; then pass; else fail "ropeattn $cmd --help"; fi
done
# bench, demo and train-demo left ropeattn for developer programs (issue 42):
# their --help, and the old spelling's one line saying where each went
for dev in "$RA_BENCH" "$RA_DEMO" "$RA_TRAIN_DEMO"; do
    if "$dev" --help >"$TMP/stdout" 2>"$TMP/stderr" &&
        grep -q "^usage: ${dev##*/} " "$TMP/stdout" && [ ! -s "$TMP/stderr" ]; then pass
    else fail "${dev##*/} --help"; fi
done
for cmd in bench demo train-demo; do
    expect_usage "ropeattn $cmd moved" \
        "'$cmd' moved to the developer program ropeattn-$cmd (build/ropeattn-$cmd; not installed)" \
        -- $cmd --help
done
if "$RA" --help | grep -q "build/ropeattn-bench, build/ropeattn-demo and build/ropeattn-train-demo"
then pass; else fail "ropeattn --help names the developer programs"; fi
# families: the library's table, a line each (model_type, layout, verdict)
if "$RA" families >"$TMP/stdout" 2>"$TMP/stderr" && [ ! -s "$TMP/stderr" ] &&
    grep -qx "llama	half	runs" "$TMP/stdout" && grep -qx "cohere	interleaved	runs" "$TMP/stdout" &&
    grep -q "^baichuan	half	refused: .*ALiBi" "$TMP/stdout" &&
    ! grep -qvE "^[a-z0-9_-]+	(half|interleaved)	(runs|refused: .+)$" "$TMP/stdout"; then pass
else fail "families: $(head -c 300 "$TMP/stdout") $(head -c 300 "$TMP/stderr")"; fi
expect_usage "families takes no argument" "unexpected argument" -- families llama
if "$RA" --version | grep -qE '^ropeattn [0-9]+\.[0-9]+\.[0-9]+ \(simd (amx|avx512bf16|avx512|avx2|sse2|neon)\)$'; then pass
else fail "--version"; fi
if "$RA_DEMO" --seq 16 >"$TMP/stdout" 2>&1 && grep -q "^ok: 8 of 8 checks passed" "$TMP/stdout" &&
    grep -qE "^  decode +4 steps +f32 +cache .* tokens/s" "$TMP/stdout" &&
    grep -q "prefill + decode steps = full prefill" "$TMP/stdout"; then pass
else fail "demo --seq 16 (with a prefill and 4 decode steps): $(tail -n 12 "$TMP/stdout")"; fi
if RA_BENCH_REEXEC=keep "$RA_BENCH" --only rope_decode_f32 --repeats 2 --json \
    >bench.json 2>"$TMP/stderr" && "$PY" "$TMP/helper.py" bench bench.json; then pass
else fail "bench --json: $(head -c 300 "$TMP/stderr")"; fi
# issue 44: one thread's column beside the run's, the in-cache decode, and
# the machine named in every record and in the table's first line
if RA_BENCH_REEXEC=keep "$RA_BENCH" --threads 2 --no-torch --repeats 1 --json \
    --only attention_decode_f32_l4096,attention_decode_f32_incache >bench.json 2>"$TMP/stderr" &&
    "$PY" "$TMP/helper.py" bench_one_thread bench.json; then pass
else fail "bench's one-thread column: $(head -c 300 "$TMP/stderr")"; fi
if env -u RA_BENCH_REEXEC OPENBLAS_CORETYPE=Haswell "$RA_BENCH" --only rope_decode_f32 \
    --repeats 1 >"$TMP/stdout" 2>&1 &&
    grep -q "re-ran itself without OPENBLAS_CORETYPE=Haswell" "$TMP/stdout"; then pass
else fail "bench re-runs itself without OPENBLAS_CORETYPE: $(head -c 400 "$TMP/stdout")"; fi
# The bench's options and cases are documented; --svg draws a chart; the
# seed's PyTorch code (a child process) can fail or hang without failing it.
if "$RA_BENCH" --help >"$TMP/stdout" && grep -q -- "--svg FILE" "$TMP/stdout" &&
    grep -q -- "--no-torch" "$TMP/stdout" && grep -q "attention_prefill_f32_s8192" "$TMP/stdout" &&
    grep -q "layer_projections_f32_s2048" "$TMP/stdout" && grep -q "vs torch" "$TMP/stdout"
then pass; else fail "bench --help names --svg, --no-torch, the new cases and vs torch"; fi
rm -f bench.svg
if RA_BENCH_REEXEC=keep "$RA_BENCH" --only rope_decode_f32 --repeats 1 --svg bench.svg \
    >"$TMP/stdout" 2>&1 && "$PY" "$TMP/helper.py" bench_svg bench.svg rope_decode_f32 0 &&
    grep -qE "^note: simd (amx|avx512bf16|avx512|avx2|sse2|neon) " "$TMP/stdout" &&
    grep -qE "^machine: .* \(family -?[0-9]+, model -?[0-9]+\), simd [a-z0-9]+ \([0-9]+-bit vectors\), L2 " \
        "$TMP/stdout" && grep -q "^columns: " "$TMP/stdout"; then pass
else fail "bench --svg, and the SIMD path noted: $(head -c 400 "$TMP/stdout")"; fi
# a case with a one-thread column, on 2 threads: its thin bar, and the legend
rm -f bench.svg
if RA_BENCH_REEXEC=keep "$RA_BENCH" --threads 2 --no-torch --only rope_f32 --repeats 1 \
    --svg bench.svg >"$TMP/stdout" 2>&1 && "$PY" "$TMP/helper.py" bench_svg bench.svg rope_f32 1
then pass; else fail "bench --svg draws the one-thread column: $(tail -c 400 "$TMP/stdout")"; fi
RA=$RA_BENCH expect_error "bench: --svg into a missing folder" nodir/bench.svg -- \
    --only rope_decode_f32 --repeats 1 --svg nodir/bench.svg
mkdir -p "$TMP/faketorch"
echo 'raise ImportError("no torch in this test")' >"$TMP/faketorch/torch.py"
if PYTHONPATH="$TMP/faketorch" RA_BENCH_TORCH_SCRIPT="$ROOT/bench/seed_torch.py" \
    RA_BENCH_REEXEC=keep "$RA_BENCH" --only rope_f32 --repeats 1 \
    >"$TMP/stdout" 2>&1 && grep -q "no comparison with Meta's LLaMA reference code in PyTorch.*no torch in this test" \
    "$TMP/stdout" && grep -qE "^rope_f32 .* -$" "$TMP/stdout"; then pass
else fail "bench without torch notes it and goes on: $(head -c 600 "$TMP/stdout")"; fi
printf 'sleep 30 &\nsleep 30\n' >"$TMP/hang.sh"
start=$(date +%s)
if RA_BENCH_PYTHON=/bin/sh RA_BENCH_TORCH_SCRIPT="$TMP/hang.sh" RA_BENCH_TORCH_TIMEOUT=1 \
    RA_BENCH_REEXEC=keep "$RA_BENCH" --only rope_f32 --repeats 1 >"$TMP/stdout" 2>&1 &&
    grep -q "killed after 1 s" "$TMP/stdout" && [ $(($(date +%s) - start)) -lt 20 ]; then pass
else fail "bench kills a hung torch child: $(head -c 600 "$TMP/stdout")"; fi
# PyTorch 2's column (issue 40): a stand-in for bench/torch2.py, run by
# RA_BENCH_TORCH2 at the bench's threads for the cases it times, gives its
# times; the row shows the ratio, a line under it the torch.compile one,
# --json both, and bench/torch2.py --markdown makes the README's table rows
# from that JSON.
cat >"$TMP/torch2.py" <<'EOF'
import json, sys
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
times = {"median_seconds": 1.0, "compiled_seconds": 0.5}
print(json.dumps({"torch_version": "2.99", "threads": int(args["--threads"]),
                  "cases": {name: times for name in args["--only"].split(",")}}))
EOF
cat >"$TMP/torch2_check.py" <<'EOF'
import json, sys
r = {x["name"]: x for x in json.load(open(sys.argv[1]))}
ok = r["rope_half_f32"]["torch2_seconds"] == 1.0 and r["rope_half_f32"]["vs_torch2"] > 1
ok = ok and r["rope_half_f32"]["torch2_compiled_seconds"] == 0.5
ok = ok and r["rope_decode_f32"]["torch2_seconds"] is None
sys.exit(0 if ok and r["rope_decode_f32"]["vs_torch2"] is None else f"unexpected: {r}")
EOF
torch2_bench() {
    RA_BENCH_TORCH2=$PY RA_BENCH_TORCH2_SCRIPT="$TMP/torch2.py" RA_BENCH_REEXEC=keep "$RA_BENCH" \
        --no-torch --threads 1 --only rope_half_f32,rope_decode_f32 --repeats 1 "$@"
}
if torch2_bench >"$TMP/stdout" 2>&1 && grep -qE "^rope_half_f32 .* - +[0-9.]+x$" "$TMP/stdout" &&
    grep -qE "^rope_decode_f32 .* - +-$" "$TMP/stdout" &&
    grep -q "^  rope_half_f32 vs torch2 under torch.compile: [0-9.]*x (0.5 s against" "$TMP/stdout" &&
    grep -q "note: vs torch2 = PyTorch 2 .* for 1 cases (torch 2.99, 1 threads" "$TMP/stdout"
then pass; else fail "bench's vs torch2 column: $(head -c 1500 "$TMP/stdout")"; fi
if torch2_bench --json >"$TMP/torch2.json" 2>"$TMP/stderr" &&
    "$PY" "$TMP/torch2_check.py" "$TMP/torch2.json" >"$TMP/stdout" 2>&1 &&
    "$PY" "$ROOT/bench/torch2.py" --markdown "$TMP/torch2.json" >"$TMP/stdout" 2>&1 &&
    grep -qE '^\| RoPE .*: eager / torch.compile \| 1 s / 500 ms \| [0-9.]+ ms \| [0-9.]+x / [0-9.]+x \|$' \
        "$TMP/stdout" && [ "$(wc -l <"$TMP/stdout")" = 3 ]
then pass
else fail "bench --json's torch2 times, torch2.py --markdown: $(cat "$TMP/stdout" "$TMP/stderr" | head -c 1500)"; fi

# ---- hostile files: each kind of damage its own message --------------------
# expect_hostile NAME KIND PATTERN -- ARGS...: expect_error's checks (exit
# 1..127, one line, no y.npy), and the line names the damage: it matches
# PATTERN, holds KIND (the words for that kind of damage) and no other
# kind's words (checked once all have run).
hostile_names=() hostile_kinds=() hostile_lines=()
expect_hostile() {
    local name=$1 kind=$2 pattern=$3; shift 4
    expect_error "$name" y.npy -- "$@"
    hostile_names+=("$name") hostile_kinds+=("$kind") hostile_lines+=("$(head -n 1 "$TMP/stderr")")
    if grep -qF -- "$kind" "$TMP/stderr" && grep -q -- "$pattern" "$TMP/stderr"; then pass
    else fail "$name: expected '$kind' and /$pattern/, got: $(head -c 300 "$TMP/stderr")"; fi
}
"$PY" - "$TMP" <<'PYEOF'
import json, struct, sys
import numpy as np
out = sys.argv[1]
def st(path, header, data=b"", header_len=None):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    with open(f"{out}/{path}", "wb") as f:
        f.write(struct.pack("<Q", len(text) if header_len is None else header_len) + text + data)
def entry(dtype, shape, offsets):
    return {"dtype": dtype, "shape": shape, "data_offsets": offsets}
def npy_header(path, dict_text, data_len):
    text = dict_text.encode()
    text += b" " * (-(10 + len(text) + 1) % 64) + b"\n"
    with open(f"{out}/{path}", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + bytes(data_len))
for name in ["h_empty.safetensors", "h_empty.npy", "h_empty.json"]:
    open(f"{out}/{name}", "wb").close()
st("h_near_max.safetensors", b"{}", header_len=2**64 - 8)
st("h_not_json.safetensors", b"wq.weight: F32 [64, 64]")
st("h_truncated.safetensors", b'{"wq.weight": {"dtype": "F32", "shape": [64, 64], ')
st("h_array.safetensors", b"[1, 2, 3]")
st("h_reversed.safetensors", {"wq.weight": entry("F32", [2], [8, 0])}, bytes(16))
st("h_overlap.safetensors", {"wq.weight": entry("F32", [2], [0, 8]),
                             "wk.weight": entry("F32", [2], [4, 12])}, bytes(16))
st("h_overflow.safetensors", {"wq.weight": entry("F32", [2**32, 2**32, 2**32], [0, 8])}, bytes(8))
st("h_unknown_dtype.safetensors", {"wq.weight": entry("Q8", [2], [0, 2])}, bytes(2))
st("h_mismatch.safetensors", {"wq.weight": entry("F64", [2], [0, 8])}, bytes(8))
dup = b'{"wq.weight": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]}, ' \
      b'"wq.weight": {"dtype": "U8", "shape": [4], "data_offsets": [4, 8]}}'
st("h_duplicate.safetensors", dup, bytes(8))
npy_header("h_huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }", 8)
np.save(f"{out}/h_fortran.npy", np.asfortranarray(np.ones((2, 5, 64), np.float32)))
np.save(f"{out}/h_int32.npy", np.ones((2, 5, 64), np.int32))
np.save(f"{out}/h_int16.npy", np.ones((2, 5, 64), np.int16))
np.save(f"{out}/h_bigendian.npy", np.ones((2, 5, 64), ">f4"))
with open(f"{out}/h_beyond.npy", "wb") as f:
    f.write(b"\x93NUMPY\x01\x00\xff\xff{'descr': '<f4'}")
open(f"{out}/h_not_json.json", "w").write("hidden_size = 64\n")
open(f"{out}/h_truncated.json", "w").write('{"hidden_size": 64, "num_attention_heads": 4,')
PYEOF
W="--input x.npy --output y.npy --n-heads 4 --theta 10000"
X="--weights seed_F32.safetensors --output y.npy --n-heads 4 --theta 10000"
expect_hostile "hostile: empty weights file" "the file is empty" \
    "the file is empty" -- attention --weights h_empty.safetensors $W
expect_hostile "hostile: empty input file" "the file is empty" \
    "the file is empty" -- attention --input h_empty.npy $X
expect_hostile "hostile: empty config file" "the file is empty" \
    "the file is empty" -- attention $SEED --config h_empty.json
expect_hostile "hostile: header length beyond the file" "exceeds the file size" \
    "header length 1099511627776 exceeds the file size" -- attention \
    --weights st_badlen.safetensors $W
expect_hostile "hostile: header length near 2^64" "exceeds the file size" \
    "header length 18446744073709551608 exceeds the file size" -- attention \
    --weights h_near_max.safetensors $W
expect_hostile "hostile: npy header length beyond the file" "exceeds the file size" \
    "header length 65535 exceeds the file size" -- attention --input h_beyond.npy $X
expect_hostile "hostile: header that is not JSON" "not valid JSON" \
    "the header is not valid JSON" -- attention --weights h_not_json.safetensors $W
expect_hostile "hostile: truncated JSON header" "not valid JSON" \
    "the header is not valid JSON" -- attention --weights h_truncated.safetensors $W
expect_hostile "hostile: header that is a JSON array" "not a JSON object" \
    "the header is not a JSON object" -- attention --weights h_array.safetensors $W
expect_hostile "hostile: config that is not JSON" "not valid JSON" \
    "h_not_json.json: not valid JSON" -- attention $SEED --config h_not_json.json
expect_hostile "hostile: truncated config" "not valid JSON" \
    "h_truncated.json: not valid JSON" -- attention $SEED --config h_truncated.json
expect_hostile "hostile: data offsets reversed" "are reversed" \
    "data_offsets \[8, 0) are reversed" -- attention --weights h_reversed.safetensors $W
expect_hostile "hostile: data offsets overlapping" "overlap" \
    'tensors "wq.weight" and "wk.weight" overlap' -- attention --weights h_overlap.safetensors $W
expect_hostile "hostile: data offsets outside the file" "lie outside the data area" \
    "lie outside the data area" -- attention --weights st_badoffsets.safetensors $W
expect_hostile "hostile: element count beyond 64 bits" "has too many elements" \
    "\[4294967296, 4294967296, 4294967296\] has too many elements" -- attention \
    --weights h_overflow.safetensors $W
expect_hostile "hostile: npy shape beyond 64 bits" "has too many elements" \
    "\[4611686018427387904, 4\] has too many elements" -- attention --input h_huge.npy $X
expect_hostile "hostile: unknown dtype" "unknown dtype" \
    'unknown dtype "Q8"' -- attention --weights h_unknown_dtype.safetensors $W
expect_hostile "hostile: dtype that does not match the bytes" "bytes but shape" \
    "hold 8 bytes but shape \[2\] of F64 needs 16" -- attention --weights h_mismatch.safetensors $W
expect_hostile "hostile: integer weights" "expected F32" \
    "has dtype I32; expected F32" -- attention --weights st_i32.safetensors $W
expect_hostile "hostile: duplicate names" "appears twice" \
    'tensor name "wq.weight" appears twice' -- attention --weights h_duplicate.safetensors $W
expect_hostile "hostile: missing tensor" "but no tensor" \
    "but no tensor 'wo.weight'" -- attention --weights st_missing.safetensors $W
expect_hostile "hostile: npy bad magic" "bad magic" \
    "bad magic" -- attention --input badmagic.npy $X
expect_hostile "hostile: npy Fortran order" "Fortran-order" \
    "Fortran-order arrays are not supported" -- attention --input h_fortran.npy $X
expect_hostile "hostile: npy integer input" "must hold float32" \
    "must hold float32 or float64 values ('<f4', '<f8')" -- attention --input h_int32.npy $X
expect_hostile "hostile: float64 beyond float32's range" "beyond float32's range" \
    "x64_huge.npy: element 451 of its \[2, 5, 64\] float64 values is -1e+39" -- \
    attention --input x64_huge.npy $X
expect_hostile "hostile: npy int16" "is not supported (only" \
    "dtype '<i2' is not supported" -- attention --input h_int16.npy $X
expect_hostile "hostile: npy big-endian" "big-endian" \
    "big-endian dtype '>f4' is not supported" -- attention --input h_bigendian.npy $X
expect_hostile "hostile: truncated npy" "truncated:" \
    "truncated: the file holds" -- attention --input truncated.npy $X
# A line that holds another kind's words does not name its own damage.
for i in "${!hostile_names[@]}"; do
    clash=""
    for j in "${!hostile_kinds[@]}"; do
        [ "${hostile_kinds[$i]}" = "${hostile_kinds[$j]}" ] && continue
        printf '%s\n' "${hostile_lines[$i]#*: }" | grep -qF -- "${hostile_kinds[$j]}" &&
            clash="$clash '${hostile_kinds[$j]}'"
    done
    if [ -z "$clash" ]; then pass; else fail "${hostile_names[$i]}: also reads as$clash"; fi
done
echo "hostile files: ${#hostile_names[@]} cases"

# ---- bad input: exit 1..127, one line on stderr, no output ------------------
expect_error "missing input file" y.npy -- attention --weights seed_F32.safetensors \
    --input nope.npy --output y.npy --n-heads 4 --theta 10000
expect_error "missing weights file" y.npy -- attention --weights nope.safetensors \
    --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "truncated npy" y.npy -- attention --weights seed_F32.safetensors \
    --input truncated.npy --output y.npy --n-heads 4 --theta 10000
expect_error "bad npy magic" y.npy -- attention --weights seed_F32.safetensors \
    --input badmagic.npy --output y.npy --n-heads 4 --theta 10000
expect_error "npy with the wrong dim" y.npy -- attention --weights seed_F32.safetensors \
    --input wrongdim.npy --output y.npy --n-heads 4 --theta 10000
expect_error "4-D attention input" y.npy -- attention --weights seed_F32.safetensors \
    --input x4d.npy --output y.npy --n-heads 4 --theta 10000
expect_error "safetensors header length beyond the file" y.npy -- attention \
    --weights st_badlen.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "safetensors data offsets outside the file" y.npy -- attention \
    --weights st_badoffsets.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "an npy file given as weights" y.npy -- attention \
    --weights x.npy --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "missing tensor" y.npy -- attention --weights st_missing.safetensors \
    --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_ok "a zero bias adds nothing" y.npy ref_F32.npy 1e-4 -- attention \
    --weights st_bias.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "a bias of the wrong length" y.npy -- attention --weights st_badbias.safetensors \
    --input x.npy --output y.npy --n-heads 4 --theta 10000
# attention_bias false in config.json: transformers builds no biases and
# does not load them, so a bias in the checkpoint is refused; true, without
# model_type: added; true for Llama: its model biases q, k, v and o, so a
# checkpoint with wq's only is refused.
printf '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "attention_bias": %s}' \
    false >nobias.json
printf '{"hidden_size": 64, "num_attention_heads": 4, "attention_bias": %s}' true >bias.json
printf '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "attention_bias": %s}' \
    true >llama_bias.json
expect_error "a bias with attention_bias false" y.npy -- attention --weights st_bias.safetensors \
    --config nobias.json --layout interleaved --input x.npy --output y.npy
expect_error "Llama's attention_bias true and no wk.bias" y.npy -- attention \
    --weights st_bias.safetensors --config llama_bias.json --layout interleaved --input x.npy \
    --output y.npy
expect_ok "a zero bias with attention_bias true" y.npy ref_F32.npy 1e-4 -- attention \
    --weights st_bias.safetensors --config bias.json --layout interleaved --input x.npy \
    --output y.npy
expect_error "no attention tensors" y.npy -- attention --weights st_notensors.safetensors \
    --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "I32 weights" y.npy -- attention --weights st_i32.safetensors \
    --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "weights of the wrong shape" y.npy -- attention --weights st_badshape.safetensors \
    --input x.npy --output y.npy --n-heads 4 --theta 10000 --n-kv-heads 2
expect_error "--n-heads not --theta 10000 dividing dim" y.npy -- attention $SEED --n-heads 3
expect_error "--n-kv-heads not dividing n_heads" y.npy -- attention $SEED --n-heads 4 \
    --theta 10000 --n-kv-heads 3
expect_error "--n-kv-heads not matching wk" y.npy -- attention $SEED --n-heads 4 --theta 10000 \
    --n-kv-heads 4
expect_error "no --n-heads and no --config" y.npy -- attention $SEED --theta 10000
expect_error "config hidden_size differs from dim" y.npy -- attention $SEED \
    --config config_bad_hidden.json
expect_error "a q norm over the whole projection" y.npy -- attention \
    --weights hf_fullnorm.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "Gemma's query_pre_attn_scalar" y.npy -- attention $SEED \
    --config config_gemma.json
expect_error "a negative rms_norm_eps" y.npy -- attention $SEED --config config_bad_eps.json
# A window of S - 1 tokens: the last token alone no longer sees the first
# (tests/test_families.sh checks windows against transformers' arithmetic).
rm -f y.npy
if "$RA" attention $SEED --config cw_short.json 2>"$TMP/stderr" && "$PY" -c "
import numpy as np, sys
y, ref = np.load('y.npy'), np.load('y_seed.npy')
same = np.abs(y - ref).max(axis=-1) <= 1e-5 * np.abs(ref).max()
sys.exit(0 if same[..., :-1].all() and not same[..., -1].any() else 1)"; then pass
else fail "a sliding window shorter than the input: $(cat "$TMP/stderr")"; fi
expect_error "a sliding layer in layer_types, names without a layer" y.npy -- attention $SEED \
    --config cw_types.json
expect_error "another kind of attention in layer_types" y.npy -- attention \
    --weights hf_2layers.safetensors --input x.npy --output y.npy --config cw_chunked.json --layer 0
expect_error "missing config file" y.npy -- attention $SEED --config nope.json
expect_error "a shard the index names is missing" y.npy -- attention \
    --weights sharded/missing.index.json --input x.npy --output y.npy --n-heads 4 \
    --theta 10000 --layer 0
expect_error "a tensor in two shards" y.npy -- attention \
    --weights sharded/twice.index.json --input x.npy --output y.npy --n-heads 4 --theta 10000 \
    --layer 0
expect_error "an index naming a file in another folder" y.npy -- attention \
    --weights sharded/folder.index.json --input x.npy --output y.npy --n-heads 4 --theta 10000 \
    --layer 0
expect_error "several layers in the shards and no --layer" y.npy -- attention \
    --weights sharded/model.safetensors.index.json --input x.npy --output y.npy --n-heads 4 \
    --theta 10000
expect_error "convert-layout given an index" cv.safetensors -- convert-layout \
    --weights sharded/model.safetensors.index.json --output cv.safetensors --to interleaved \
    --n-heads 4
expect_error "several layers and no --layer" y.npy -- attention \
    --weights hf_2layers.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000
expect_error "--layer that is not there" y.npy -- attention \
    --weights hf_2layers.safetensors --input x.npy --output y.npy --n-heads 4 --theta 10000 \
    --layer 2
for bad in 0 -1 abc 2x ""; do
    expect_error "--threads '$bad'" y.npy -- attention $SEED --n-heads 4 --theta 10000 \
        --threads "$bad"
done
expect_error "--theta 0" y.npy -- attention $SEED --n-heads 4 --theta 0
expect_error "--theta nan" y.npy -- attention $SEED --n-heads 4 --theta nan
expect_error "--layout sideways" y.npy -- attention $SEED --n-heads 4 --theta 10000 \
    --layout sideways
expect_error "--path fast" y.npy -- attention $SEED --n-heads 4 --theta 10000 --path fast
expect_error "--start-pos -1" y.npy -- attention $SEED --n-heads 4 --theta 10000 --start-pos -1
expect_error "--n-heads with --theta 10000 no value" y.npy -- attention $SEED --n-heads
expect_error "unknown option" y.npy -- attention $SEED --n-heads 4 --theta 10000 --frobnicate
expect_error "positional argument" y.npy -- attention $SEED --n-heads 4 --theta 10000 extra
expect_error "missing --output" - -- attention --weights seed_F32.safetensors --input x.npy \
    --n-heads 4 --theta 10000
expect_error "output folder that does not exist" nodir/y.npy -- attention \
    --weights seed_F32.safetensors --input x.npy --output nodir/y.npy --n-heads 4 --theta 10000
expect_error "unknown command" - -- frobnicate
expect_error "no command" - --
expect_error "help with an argument" - -- help attention
expect_error "--help with an argument" - -- --help attention
expect_error "--version with an argument" - -- --version extra
expect_error "rope: odd head_dim" r.npy -- rope --input rope_odd.npy --output r.npy
expect_error "rope: 3-D input" r.npy -- rope --input rope_3d.npy --output r.npy
expect_error "rope: truncated npy" r.npy -- rope --input truncated.npy --output r.npy
expect_error "rope: --threads 0" r.npy -- rope --input rope_x.npy --output r.npy --threads 0
expect_error "rope: output folder that does not exist" nodir/r.npy -- rope \
    --input rope_x.npy --output nodir/r.npy
expect_error "freqs: odd --head-dim" c.npy -- freqs --head-dim 7 --end 4 --cos c.npy --sin s.npy
expect_error "freqs: --end 0" c.npy -- freqs --head-dim 8 --end 0 --cos c.npy --sin s.npy
expect_error "freqs: --end abc" c.npy -- freqs --head-dim 8 --end abc --cos c.npy --sin s.npy
expect_error "freqs: sin folder missing, so no cos either" c.npy -- \
    freqs --head-dim 8 --end 4 --cos c.npy --sin nodir/s.npy
mkdir -p "$TMP/a_folder"
expect_error "freqs: sin write fails, so cos is removed" c.npy -- \
    freqs --head-dim 8 --end 4 --cos c.npy --sin a_folder
expect_error "freqs: same file twice" c.npy -- freqs --head-dim 8 --end 4 --cos c.npy --sin c.npy
expect_error "freqs: same file by two names" c.npy -- \
    freqs --head-dim 8 --end 4 --cos c.npy --sin ./c.npy
# rope options: --rope-parameters, --config, --positions, --seq-len, ...
F="freqs --head-dim 64 --end 8 --cos c.npy --sin s.npy"
expect_error "freqs: --rope-parameters not JSON" c.npy -- $F --rope-parameters 'yarn please'
expect_error "freqs: --rope-parameters factor as a string" c.npy -- $F \
    --rope-parameters '{"rope_type": "linear", "factor": "4"}'
expect_error "freqs: --rope-parameters unknown rope_type" c.npy -- $F \
    --rope-parameters '{"rope_type": "ntk-by-parts", "factor": 4}'
expect_error "freqs: --rope-parameters short_factor not an array" c.npy -- $F \
    --rope-parameters '{"rope_type": "longrope", "short_factor": 1.0}'
expect_error "freqs: --rope-parameters short_factor with a string" c.npy -- $F \
    --rope-parameters '{"rope_type": "longrope", "short_factor": [1.0, "x"]}'
expect_error "freqs: --rope-parameters an array" c.npy -- $F --rope-parameters '[1]'
expect_error "freqs: --rope-parameters factor 0" c.npy -- $F \
    --rope-parameters '{"rope_type": "linear", "factor": 0}'
expect_error "freqs: linear without factor" c.npy -- $F --rope-parameters '{"type": "linear"}'
expect_error "freqs: llama3 without low_freq_factor" c.npy -- $F --rope-parameters \
    '{"rope_type": "llama3", "factor": 8, "high_freq_factor": 4, "original_max_position_embeddings": 8192}'
expect_error "freqs: llama3 without original_max_position_embeddings" c.npy -- $F \
    --rope-parameters '{"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4}'
expect_error "freqs: yarn beta_fast < beta_slow" c.npy -- $F --rope-parameters \
    '{"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 64, "beta_fast": 1, "beta_slow": 32}'
expect_error "freqs: dynamic without max_position_embeddings" c.npy -- $F \
    --rope-parameters '{"rope_type": "dynamic", "factor": 2}'
expect_error "freqs: yarn with neither factor nor lengths" c.npy -- $F \
    --rope-parameters '{"rope_type": "yarn"}'
expect_error "freqs: longrope without original_max_position_embeddings" c.npy -- $F \
    --rope-parameters '{"rope_type": "longrope", "short_factor": [1], "long_factor": [1], "factor": 2}'
expect_error "freqs: longrope factor lists of the wrong length" c.npy -- $F \
    --rope-parameters '{"rope_type": "longrope", "short_factor": [1, 2], "long_factor": [1, 2], "factor": 2, "original_max_position_embeddings": 64}'
expect_error "freqs: odd rotary_dim from partial_rotary_factor" c.npy -- $F \
    --rope-parameters '{"partial_rotary_factor": 0.3}'
expect_error "freqs: config with a rope_scaling missing keys" c.npy -- freqs --end 8 \
    --cos c.npy --sin s.npy --config at_llama3_missing.json --head-dim 64
expect_error "freqs: config without head_dim and no --head-dim" c.npy -- freqs --end 8 \
    --cos c.npy --sin s.npy --config at_llama3.json
expect_error "freqs: config file missing" c.npy -- $F --config nope.json
expect_error "freqs: neither --end nor --positions" c.npy -- freqs --head-dim 8 --cos c.npy \
    --sin s.npy
expect_error "freqs: both --end and --positions" c.npy -- $F --positions rp_pos_s.npy
expect_error "freqs: float positions" c.npy -- freqs --head-dim 8 --positions rp_pos_f32.npy \
    --cos c.npy --sin s.npy
expect_error "freqs: negative position" c.npy -- freqs --head-dim 8 --positions rp_pos_neg.npy \
    --cos c.npy --sin s.npy
expect_error "freqs: empty positions" c.npy -- freqs --head-dim 8 --positions rp_pos_empty.npy \
    --cos c.npy --sin s.npy
expect_error "freqs: positions file missing" c.npy -- freqs --head-dim 8 --positions nope.npy \
    --cos c.npy --sin s.npy
expect_error "freqs: --seq-len 0" c.npy -- $F --seq-len 0
# a dynamic or longrope rope is for its length: transformers gives a longer
# sequence other frequencies
expect_error "freqs: dynamic, a position past --seq-len" c.npy -- freqs \
    --config fc_dynamic_seq_len.json --seq-len 3000 --positions fc_pos_4096.npy --cos c.npy \
    --sin s.npy
expect_error "freqs: longrope short, a position past the original length" c.npy -- freqs \
    --config fc_longrope_seq_len.json --seq-len 4096 --positions fc_pos_4096.npy --cos c.npy \
    --sin s.npy
expect_error "freqs: --max-position-embeddings abc" c.npy -- $F --max-position-embeddings abc
expect_error "freqs: --layout is not an option" c.npy -- $F --layout half
expect_error "rope: --positions of the wrong shape" r.npy -- rope --input rp_x.npy \
    --output r.npy --positions rp_pos_bad_shape.npy
expect_error "rope: --positions and --start-pos" r.npy -- rope --input rp_x.npy --output r.npy \
    --positions rp_pos_s.npy --start-pos 3
expect_error "rope: config head_dim differs" r.npy -- rope --input rp_x.npy --output r.npy \
    --config rp_cfg.json
expect_error "rope: bad --rope-parameters" r.npy -- rope --input rp_x.npy --output r.npy \
    --rope-parameters '{"factor": -1}'
expect_error "attention: llama3 config missing keys" y.npy -- attention $SEED \
    --config at_llama3_missing.json
expect_error "attention: odd rotary_dim" y.npy -- attention $SEED --config at_odd_rotary.json
expect_error "attention: longrope lists of the wrong length" y.npy -- attention $SEED \
    --config at_longrope_len.json
expect_error "attention: --positions of the wrong shape" y.npy -- attention $SEED --n-heads 4 \
    --theta 10000 \
    --positions rp_pos_bad_shape.npy
expect_error "attention: --positions and --start-pos" y.npy -- attention $SEED --n-heads 4 \
    --theta 10000 \
    --positions at_pos.npy --start-pos 1
expect_error "attention: --seq-len -5" y.npy -- attention $SEED --n-heads 4 --theta 10000 \
    --seq-len -5
C="--weights seed_F32.safetensors --output cv.safetensors"
expect_error "convert-layout: no --to" cv.safetensors -- convert-layout $C --n-heads 4
expect_error "convert-layout: --to sideways" cv.safetensors -- convert-layout $C --to sideways \
    --n-heads 4
expect_error "convert-layout: neither --config nor --n-heads" cv.safetensors -- \
    convert-layout $C --to half
expect_error "convert-layout: --n-heads not dividing the rows" cv.safetensors -- \
    convert-layout $C --to half --n-heads 5
expect_error "convert-layout: --n-kv-heads not matching wk" cv.safetensors -- \
    convert-layout $C --to half --n-heads 4 --n-kv-heads 4
expect_error "convert-layout: odd rotary_dim" cv.safetensors -- convert-layout $C --to half \
    --config cv_odd.json
# A shard without q/k projections (embeddings only) is copied unchanged.
rm -f cv.safetensors
if "$RA" convert-layout --weights st_notensors.safetensors --output cv.safetensors --to half \
    --n-heads 4 2>"$TMP/stderr" &&
    "$PY" -c "import sys; from st_read import read_f32; import numpy as np
a, b = read_f32('st_notensors.safetensors'), read_f32('cv.safetensors')
sys.exit(0 if sorted(a) == sorted(b) and all(np.array_equal(a[n], b[n]) for n in a) else 1)"
then pass; else fail "convert-layout: a shard without q/k not copied: $(cat "$TMP/stderr")"; fi
expect_error "convert-layout: fused qkv" cv.safetensors -- convert-layout \
    --weights cv_fused.safetensors --output cv.safetensors --to half --n-heads 4
expect_error "convert-layout: I32 wq" cv.safetensors -- convert-layout \
    --weights cv_i32.safetensors --output cv.safetensors --to half --n-heads 4
expect_error "convert-layout: rows not a multiple of head_dim" cv.safetensors -- convert-layout \
    --weights cv_rows.safetensors --output cv.safetensors --to half --config llama.json
expect_error "convert-layout: --layer that is not there" cv.safetensors -- convert-layout \
    --weights mixed.safetensors --output cv.safetensors --to half --n-heads 4 --layer 7
expect_error "convert-layout: --layer on a one-layer file" cv.safetensors -- convert-layout \
    $C --to half --n-heads 4 --layer 0
expect_error "convert-layout: weights missing" cv.safetensors -- convert-layout \
    --weights nope.safetensors --output cv.safetensors --to half --n-heads 4
expect_error "convert-layout: truncated weights" cv.safetensors -- convert-layout \
    --weights st_badlen.safetensors --output cv.safetensors --to half --n-heads 4
expect_error "convert-layout: output folder missing" nodir/cv.safetensors -- convert-layout \
    --weights seed_F32.safetensors --output nodir/cv.safetensors --to half --n-heads 4
# ---- train-demo ---------------------------------------------------------------
# The layer's gradients train a small model: with RoPE its loss must fall
# (from ~ln 16 to below 0.1) and it must find the token K back on held-out
# sequences (>= 90%), beating the same model without RoPE by >= 30 points.
check_train_demo() {
    local name=$1; shift
    "$RA_TRAIN_DEMO" "$@" >"$TMP/train.out" 2>"$TMP/stderr"
    local rc=$? first last acc
    if [ "$rc" -ne 0 ]; then fail "$name: exit $rc ($(head -c 300 "$TMP/stderr"))"; return; fi
    first=$(awk '$1 == "1" && NF == 3 {print $2}' "$TMP/train.out")
    last=$(awk '$1 ~ /^[0-9]+$/ && NF == 3 {v = $2} END {print v}' "$TMP/train.out")
    acc=$(awk '$1 == "accuracy:" {print $3, $5}' "$TMP/train.out")
    if "$PY" -c 'import sys
first, last, rope, no_rope = map(float, sys.argv[1:])
sys.exit(0 if first > 2 and last < 0.1 and rope >= 0.9 and rope - no_rope >= 0.3 else 1)' \
        $first $last $acc 2>/dev/null; then pass
    else fail "$name: loss $first -> $last, accuracy (rope, no_rope) $acc"
    fi
}
check_train_demo "train-demo: RoPE learns the token 3 back, no RoPE does not" --threads 2
check_train_demo "train-demo --back 9 --seed 5, 1 thread" --back 9 --seed 5 --threads 1
# On a terminal, train-demo draws its progress line (both models' tokens:
# 100 steps x 2 x 32 x 32) while it trains.
if RA_PROGRESS_DELAY=0 "$PY" "$TMP/on_tty.py" "$RA_TRAIN_DEMO" --steps 100 --threads 1 \
    >"$TMP/tty" &&
    grep -qE 'train-demo: [0-9]+ of 204800 tokens, [0-9.]+ s, [0-9]+ tokens/s' "$TMP/tty"; then pass
else fail "train-demo on a terminal: no progress line: $(head -c 300 "$TMP/tty")"; fi
if RA_PROGRESS_DELAY=0 "$PY" "$TMP/on_tty.py" "$RA_TRAIN_DEMO" --steps 100 --quiet >"$TMP/tty" &&
    [ "$(cat "$TMP/tty")" = "''" ]; then pass
else fail "train-demo --quiet on a terminal wrote: $(head -c 300 "$TMP/tty")"; fi
RA=$RA_TRAIN_DEMO expect_error "train-demo: --back 0" - -- --back 0
RA=$RA_TRAIN_DEMO expect_error "train-demo: --steps abc" - -- --steps abc
RA=$RA_DEMO expect_error "demo: unknown option" - -- --fast
RA=$RA_BENCH expect_error "bench: unknown case" - -- --only rope_nope
RA=$RA_BENCH expect_error "bench: --repeats 0" - -- --repeats 0

summary
