"""Layer and KVCache on the checkpoints transformers itself saved
(tests/hf/<case>/, see tests/test_hf.sh), freqs against Meta's reference
code in float64, bad inputs, threads, and no reference or memory growth.

Tolerances on y, relative to max|y| (y.npy is transformers' own output):
transformers computes the layer in float32 and its float32 differs from
float64 by up to 1e-6 on these cases (case.json's f32_vs_f64); ropeattn's
float32 differs from it by under 1e-6.  1e-5 is the CLI's own tolerance in
tests/test_hf.sh; a wrong rope, mask or head mapping is off by 1e-1 or more.
A 16-bit cache rounds every key and value once: 5e-3 (float16) and 3e-2
(bfloat16), as test_hf.sh.
"""
import json
import os
import shutil
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import ropeattn
from threads import run_in_threads, wakeups_during

# The repository's tests/hf, found from this file (test_python.sh runs
# pytest from a temporary directory on the absolute path of python/tests).
HF = Path(__file__).resolve().parents[2] / "tests" / "hf"
CASES = sorted(d.name for d in HF.iterdir() if (d / "case.json").is_file())
TOL = {"float32": 1e-5, "float16": 5e-3, "bfloat16": 3e-2,
       "int8": 3e-2, "float8_e4m3fn": 1.5e-1}  # tests/test_hf.sh says why


def load(name):
    d = HF / name
    case = json.loads((d / "case.json").read_text())
    return (d, case, np.load(d / "x.npy"), np.load(d / "pos.npy"), np.load(d / "y.npy"))


def build(name, **options):
    """The case's layer, for its largest position (as the CLI builds it for
    --positions: dynamic and longrope scale by it)."""
    d, case, x, pos, y = load(name)
    layer = ropeattn.Layer.from_pretrained(d, layer=case["layer"], max_position=int(pos.max()),
                                           **options)
    return layer, x, pos, y


def fixed_length(name):
    """The options that fix a dynamic rope's length past max_position_embeddings
    for every call, as test_hf.sh's --seq-len: its cached steps reach lengths
    whose frequencies differ from the whole input's
    (test_by_length_ropes_are_for_one_length)."""
    by_length = ("llama_dynamic_long", "bailing_hybrid_dynamic")
    return {"seq_len": int(load(name)[3].max()) + 1} if name in by_length else {}


def rel(got, want):
    assert got.shape == want.shape and got.dtype == np.float32
    assert np.all(np.isfinite(got))
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def test_cases_found():
    assert len(CASES) >= 10, HF


@pytest.mark.parametrize("name", CASES)
def test_forward(name):
    layer, x, pos, y = build(name)
    assert rel(layer(x, positions=pos), y) < 1e-5
    # [S, dim]: batch 1, positions [S] (M-RoPE's [3, B, S]: [3, S])
    row = pos[:, 1] if pos.ndim == 3 else pos[1]
    assert rel(layer(x[1], positions=row), y[1]) < 1e-5


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int8", "float8_e4m3fn"])
@pytest.mark.parametrize("name", CASES)
def test_prefill_then_decode(name, dtype):
    """Half the tokens as one prefill, then one at a time, as a generator;
    an encoder's layer (no causal mask: case.json's "causal" false) refuses
    the cache by name, as its tokens see later ones."""
    layer, x, pos, y = build(name, **fixed_length(name))
    b, s = x.shape[:2]
    p = max(1, s // 2)
    cache = ropeattn.KVCache(layer, batch=b, capacity=s, dtype=dtype)
    if load(name)[1].get("causal") is False:
        with pytest.raises(ropeattn.UnsupportedError, match="non_causal"):
            layer(x[:, :p], positions=pos[..., :p], cache=cache)
        return
    ys = [layer(x[:, :p], positions=pos[..., :p], cache=cache)]
    assert len(cache) == p
    for t in range(p, s):
        ys.append(layer(x[:, t:t + 1], positions=pos[..., t:t + 1], cache=cache))
    assert len(cache) == s and cache.length(b - 1) == s
    assert rel(np.concatenate(ys, axis=1), y) < TOL[dtype]
    cache.reset()
    assert len(cache) == 0


def test_positions_default_start_and_cache_continuation():
    layer, x, _, _ = build("llama_default")
    s = x.shape[1]
    np.testing.assert_array_equal(layer(x), layer(x, positions=np.arange(s)))
    np.testing.assert_array_equal(layer(x, positions=5), layer(x, positions=np.arange(5, 5 + s)))
    # With a cache, positions=None is the cache's length: 0 .. S-1 again.
    cache = ropeattn.KVCache(layer, 2, s)
    got = [layer(x[:, :4], cache=cache)]
    got += [layer(x[:, t:t + 1], cache=cache) for t in range(4, s)]
    assert rel(np.concatenate(got, axis=1), layer(x)) < 1e-5
    # A non-contiguous x is copied: the same y.
    xt = np.asfortranarray(x)
    np.testing.assert_array_equal(layer(xt), layer(x))


def test_config_and_tensor_names():
    layer, _, _, _ = build("llama_default")
    cfg = json.loads((HF / "llama_default" / "config.json").read_text())
    c = layer.config
    assert (c["dim"], c["n_heads"], c["n_kv_heads"], c["head_dim"]) == (
        cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
        cfg["head_dim"])
    assert (c["window"], c["chunk"], c["softcap"], c["model_type"]) == (0, 0, 0.0, "llama")
    assert c["rope"]["type"] == "default" and c["rope"]["layout"] == "half"
    assert layer.tensor_names == tuple(f"model.layers.1.self_attn.{p}_proj.weight"
                                       for p in "qkvo")
    assert layer.tensor_shapes["model.layers.1.self_attn.k_proj.weight"] == (16, 32)
    names = build("qwen2_bias")[0].tensor_names
    assert any(n.endswith("q_proj.bias") for n in names)
    assert any(n.endswith("q_norm.weight") for n in build("qwen3_qknorm")[0].tensor_names)
    stablelm = build("stablelm_partial")[0].config["rope"]
    assert stablelm["rotary_dim"] < stablelm["head_dim"]
    assert build("llama_dynamic_long")[0].config["rope"]["type"] == "dynamic"


def test_config_shows_the_families_features():
    """Layer.config names the features a family's layer runs with: LFM3's
    gate per head and proportional rope, MiMo-V2-Flash's v_scale, Gemma 3n's
    v_norm, Qwen3-Next's gate in q_proj (and a Llama layer none of them)."""
    lfm3 = build("lfm3_proportional_full")[0].config
    assert lfm3["gated_output"] and lfm3["gate_per_head"] and not lfm3["gate_softplus"]
    assert 0 < lfm3["rope"]["rotating_pairs"] < lfm3["rope"]["head_dim"] // 2
    assert build("mimo_v2_flash_full")[0].config["v_scale"] == pytest.approx(0.6)
    assert build("gemma3n_full")[0].config["v_norm"] is True
    assert build("qwen3_next_gated")[0].config["gated_output"] is True
    llama = build("llama_default")[0].config
    assert llama["v_scale"] == 1.0 and llama["rope"]["rotating_pairs"] == 0
    assert not any(llama[k] for k in ("norm_after_rope", "clip_after_norm", "v_norm",
                                      "gated_output", "gate_per_head", "gate_softplus",
                                      "q_b_raw_latent"))
    assert (llama["q_latent_scale"], llama["kv_latent_scale"]) == (1.0, 1.0)


def test_config_overrides():
    """theta, rope_parameters and max_position_embeddings replace the
    config's, as the CLI's --theta, --rope-parameters and
    --max-position-embeddings; bad values get libropeattn_hf's message."""
    d = HF / "llama_default"
    assert ropeattn.Layer.from_pretrained(d, layer=1, theta=5e5).config["rope"]["theta"] == 5e5
    rope = ropeattn.Layer.from_pretrained(
        d, layer=1, rope_parameters={"rope_type": "linear", "factor": 4.0}).config["rope"]
    assert (rope["type"], rope["factor"]) == ("linear", 4.0)
    rope = ropeattn.Layer.from_pretrained(
        d, layer=1, rope_parameters='{"rope_type": "dynamic", "factor": 2.0}',
        max_position_embeddings=16, seq_len=40).config["rope"]
    assert (rope["type"], rope["max_position_embeddings"], rope["seq_len"]) == ("dynamic", 16, 40)
    # theta checked as RotaryEmbedding's, in its name: True ran theta 1, "5e5"
    # was parsed, 1e-320 got the library's DBL_MIN wording
    for theta in (-1.0, True, "5e5", 1e-320, float("nan")):
        with pytest.raises(ropeattn.ArgumentError, match="^theta: expected"):
            ropeattn.Layer.from_pretrained(d, layer=1, theta=theta)
    with pytest.raises(ropeattn.Error, match="ra_hf_config_set_rope_parameters"):
        ropeattn.Layer.from_pretrained(d, layer=1, rope_parameters="{not json")
    # NumPy scalars are numbers (json.dumps raised TypeError); bytes are JSON
    # text; NaN, a set, a list, bytes not UTF-8 are refused naming
    # rope_parameters (TypeErrors naming none, or the library's "not valid
    # JSON at column 35" for the NaN json.dumps wrote)
    rope = ropeattn.Layer.from_pretrained(d, layer=1, rope_parameters={
        "rope_type": "linear", "factor": np.float32(4.0), "rope_theta": np.int64(20000)}
    ).config["rope"]
    assert (rope["type"], rope["factor"], rope["theta"]) == ("linear", 4.0, 20000.0)
    rope = ropeattn.Layer.from_pretrained(
        d, layer=1, rope_parameters=b'{"rope_type": "linear", "factor": 2.0}').config["rope"]
    assert (rope["type"], rope["factor"]) == ("linear", 2.0)
    for bad in ({"rope_type": "linear", "factor": float("nan")}, {"rope_type": {1, 2}},
                ["linear"], b"\xff"):
        with pytest.raises(ropeattn.ArgumentError, match="^rope_parameters: "):
            ropeattn.Layer.from_pretrained(d, layer=1, rope_parameters=bad)
    layer = ropeattn.Layer.from_pretrained(d, layer=1, n_kv_heads=2, layout="interleaved")
    assert layer.config["rope"]["layout"] == "interleaved"


def test_by_length_ropes_need_a_length():
    d, case, x, pos, y = load("llama_dynamic_long")
    with pytest.raises(ropeattn.ArgumentError, match="seq_len"):
        ropeattn.Layer.from_pretrained(d, layer=case["layer"])
    layer = ropeattn.Layer.from_pretrained(d, layer=case["layer"], seq_len=int(pos.max()) + 1)
    assert rel(layer(x, positions=pos), y) < 1e-5


def test_by_length_ropes_are_for_one_length():
    """A dynamic or longrope Layer is for one length: positions where
    transformers' frequencies differ are refused (issue 39: max_position 11
    took positions up to 40, 16% off), and so is a cached step whose length
    gives other frequencies than the Layer's, as the CLI's --prefill refuses
    it; seq_len fixes the length for every call."""
    d, case, x, pos, y = load("llama_dynamic_long")  # max_position_embeddings 16
    short = ropeattn.Layer.from_pretrained(d, layer=case["layer"], max_position=11)
    with pytest.raises(ropeattn.ArgumentError, match="seq_len 12"):
        short(x, positions=pos)  # row 1 reaches 40
    # up to max_position_embeddings every length has the original frequencies
    cache = ropeattn.KVCache(short, batch=1, capacity=20)
    short(x[:1], cache=cache)
    for _ in range(4):  # positions 12 .. 15: generating on, exactly
        short(x[:1, :1], cache=cache)
    with pytest.raises(ropeattn.ArgumentError, match="seq_len 12"):
        short(x[:1, :1], cache=cache)  # position 16
    assert len(cache) == 16
    # A cached step of 35 tokens: transformers' frequencies of 35, not 41.
    long = ropeattn.Layer.from_pretrained(d, layer=case["layer"], max_position=40)
    cache = ropeattn.KVCache(long, batch=2, capacity=12)
    with pytest.raises(ropeattn.ArgumentError, match="reach length 35"):
        long(x[:, :6], positions=pos[:, :6], cache=cache)
    assert len(cache) == 0
    pool = ropeattn.KVPool(long, n_pages=8, page_size=4)
    with pytest.raises(ropeattn.ArgumentError, match="reach length 35"):
        long(x[:, :6], positions=pos[:, :6], pool=pool, ids=[pool.add(), pool.add()])
    fixed = ropeattn.Layer.from_pretrained(d, layer=case["layer"], seq_len=41)
    cache = ropeattn.KVCache(fixed, batch=2, capacity=12)
    ys = [fixed(x[:, :6], positions=pos[:, :6], cache=cache)]
    ys += [fixed(x[:, t:t + 1], positions=pos[:, t:t + 1], cache=cache) for t in range(6, 12)]
    assert rel(np.concatenate(ys, axis=1), y) < 1e-5

    d, case, x, pos, y = load("llama_longrope_long")  # original 16, positions to 39
    with pytest.raises(ropeattn.ArgumentError, match="seq_len 12"):
        ropeattn.Layer.from_pretrained(d, layer=case["layer"], max_position=11)(x, positions=pos)
    layer = ropeattn.Layer.from_pretrained(d, layer=case["layer"], max_position=39)
    cache = ropeattn.KVCache(layer, batch=1, capacity=12)
    with pytest.raises(ropeattn.ArgumentError, match="reach length 6"):
        layer(x[:1, :6], cache=cache)  # short factors in transformers, long here


def test_by_length_ropes_refuse_a_shorter_call():
    """A call without a cache is one forward of transformers, whose dynamic
    or longrope frequencies are those of its own length: a Layer for a
    longer length refuses a call whose length has other ones (a Layer with
    max_position 40 on 20 tokens was 19% off transformers' dynamic rope, on
    8 tokens 13% off its longrope); seq_len fixes the length."""
    d, case, x, pos, y = load("llama_dynamic_long")  # max_position_embeddings 16
    layer = ropeattn.Layer.from_pretrained(d, layer=case["layer"], max_position=40)
    x20 = np.concatenate([x[:1]] * 2, axis=1)[:, :20]
    with pytest.raises(ropeattn.ArgumentError, match=r"reach length 20.*max_position=19"):
        layer(x20)
    with pytest.raises(ropeattn.ArgumentError, match="reach length 8"):
        layer(x[:, :8], positions=np.arange(8))  # original frequencies in transformers
    assert rel(layer(x, positions=pos), y) < 1e-5  # the Layer's own length
    short = ropeattn.Layer.from_pretrained(d, layer=case["layer"], max_position=11)
    short(x[:, :8])  # below max_position_embeddings: the original frequencies, as transformers
    d, case, x, pos, y = load("llama_longrope_long")  # original 16, positions to 39
    layer = ropeattn.Layer.from_pretrained(d, layer=case["layer"], max_position=39)
    with pytest.raises(ropeattn.ArgumentError, match="reach length 11"):
        layer(x[:, :8], positions=3)  # 3 .. 10: short factors in transformers
    layer(x[:, :8], positions=20)  # 20 .. 27: long factors, as the Layer's
    fixed = ropeattn.Layer.from_pretrained(d, layer=case["layer"], seq_len=40)
    fixed(x[:, :8], positions=3)


def test_file_and_config_paths():
    d, case, x, pos, y = load("llama_linear_mha")
    layer = ropeattn.Layer.from_pretrained(d / "model.safetensors", layer=case["layer"],
                                           config=d / "config.json")
    assert rel(layer(x, positions=pos), y) < 1e-5
    # Without config=, the config.json beside the weights, as transformers.
    beside = ropeattn.Layer.from_pretrained(str(d / "model.safetensors"), layer=case["layer"])
    assert np.array_equal(beside(x, positions=pos), layer(x, positions=pos))


def test_no_config_needs_the_rope(tmp_path):
    """Weights with no config.json beside them: the rope is asked for, never
    theta 10000 by default; Hugging Face names ask for the layout too (Cohere
    and GLM pair their features interleaved under the same names)."""
    d, case, x, pos, y = load("llama_default")
    weights = tmp_path / "model.safetensors"
    shutil.copy(d / "model.safetensors", weights)
    config = json.loads((d / "config.json").read_text())
    theta = config.get("rope_theta") or config["rope_parameters"]["rope_theta"]
    with pytest.raises(ropeattn.ArgumentError, match="theta="):
        ropeattn.Layer.from_pretrained(weights, layer=case["layer"],
                                       n_heads=config["num_attention_heads"])
    with pytest.raises(ropeattn.ArgumentError, match="layout"):
        ropeattn.Layer.from_pretrained(weights, layer=case["layer"], theta=theta,
                                       n_heads=config["num_attention_heads"])
    plain = ropeattn.Layer.from_pretrained(
        weights, layer=case["layer"], theta=theta, layout="half",
        n_heads=config["num_attention_heads"], n_kv_heads=config["num_key_value_heads"])
    assert rel(plain(x, positions=pos), y) < 1e-5


def test_folder_prefers_model_safetensors(tmp_path):
    """A folder holding both model.safetensors and a sharded index: the
    single file, as transformers' from_pretrained takes it; a bytes or
    os.PathLike path is a path, as Python's file functions take it."""
    d, case, x, pos, y = load("llama_default")  # every tensor F32
    raw = (d / "model.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    doubled = np.frombuffer(raw[8 + n:], np.float32) * 2  # other weights, same names
    (tmp_path / "shard.safetensors").write_bytes(raw[:8 + n] + doubled.tobytes())
    names = [k for k in json.loads(raw[8:8 + n]) if k != "__metadata__"]
    (tmp_path / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {}, "weight_map": {k: "shard.safetensors" for k in names}}))
    shutil.copy(d / "model.safetensors", tmp_path)
    shutil.copy(d / "config.json", tmp_path)
    layer = ropeattn.Layer.from_pretrained(tmp_path, layer=case["layer"])
    assert layer.paths[0] == str(tmp_path / "model.safetensors")
    assert rel(layer(x, positions=pos), y) < 1e-5
    sharded = ropeattn.Layer.from_pretrained(tmp_path / "model.safetensors.index.json",
                                             layer=case["layer"], config=tmp_path / "config.json")
    assert rel(sharded(x, positions=pos), y) > 1e-1
    for path in (bytes(tmp_path), os.fsencode(tmp_path / "model.safetensors")):
        layer = ropeattn.Layer.from_pretrained(path, layer=case["layer"],
                                               config=os.fsencode(tmp_path / "config.json"))
        assert rel(layer(x, positions=pos), y) < 1e-5


def unaligned(a):
    """A C-contiguous copy of a that is not aligned to its item size, as
    np.frombuffer at an odd offset gives."""
    buf = bytearray(a.nbytes + 1)
    u = np.frombuffer(buf, a.dtype, a.size, offset=1).reshape(a.shape)
    u[...] = a
    assert u.flags.c_contiguous and not u.flags.aligned
    return u


def test_unaligned_inputs_are_copied():
    """Every input of every function: an unaligned C-contiguous array is
    copied (README), giving what the aligned one gives."""
    layer, x, pos, y = build("llama_default")
    np.testing.assert_array_equal(layer(unaligned(x), positions=unaligned(pos)),
                                  layer(x, positions=pos))
    mask = np.ones(x.shape[:2], np.int64)
    np.testing.assert_array_equal(layer(x, positions=pos, attention_mask=unaligned(mask)),
                                  layer(x, positions=pos))
    ys = []
    for u in (unaligned, np.asarray):
        cache = ropeattn.KVCache(layer, 2, x.shape[1])
        ys.append(layer(u(x), positions=u(pos), cache=cache))
        pool = ropeattn.KVPool(layer, n_pages=16, page_size=4)
        ids = np.array([pool.add(), pool.add()], np.int64)
        ys.append(layer(u(x), positions=u(pos), pool=pool, ids=u(ids),
                        n_new=u(np.array([x.shape[1]] * 2, np.int64))))
    np.testing.assert_array_equal(ys[0], ys[2])
    np.testing.assert_array_equal(ys[1], ys[3])

    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 5, h, 8)).astype(np.float32) for h in (4, 2, 2))
    ids5 = np.arange(10, dtype=np.int64).reshape(2, 5)
    np.testing.assert_array_equal(ropeattn.apply_rotary(unaligned(q), unaligned(ids5)),
                                  ropeattn.apply_rotary(q, ids5))
    sinks = rng.standard_normal(4).astype(np.float32)
    cu = np.array([0, 3, 5], np.int64)
    want = ropeattn.attention(q[:1], k[:1], v[:1], sinks=sinks, cu_seqlens=cu)
    got = ropeattn.attention(unaligned(q[:1]), unaligned(k[:1]), unaligned(v[:1]),
                             sinks=unaligned(sinks), cu_seqlens=unaligned(cu))
    np.testing.assert_array_equal(got, want)
    out, lse = ropeattn.attention_forward(q, k, v)
    grads = ropeattn.attention_backward(unaligned(out), q, k, v, unaligned(out), unaligned(lse))
    for g, w in zip(grads, ropeattn.attention_backward(out, q, k, v, out, lse)):
        np.testing.assert_array_equal(g, w)


def test_attention_mask():
    """Left padding: the padded row's tokens give what the row alone gives,
    its padding rows 0; the other row is unchanged."""
    layer, x, _, _ = build("llama_default")
    b, s, dim = x.shape
    pad = 3
    noise = np.random.default_rng(5).standard_normal((pad, dim)).astype(np.float32)
    xp = x.copy()
    xp[0] = np.concatenate([noise, x[0, :s - pad]])
    mask = np.ones((b, s), np.int64)
    mask[0, :pad] = 0
    pos = np.stack([np.maximum(np.cumsum(mask[0]) - 1, 0), np.arange(s)])
    y = layer(xp, positions=pos, attention_mask=mask)
    assert np.all(y[0, :pad] == 0)
    assert rel(y[0, pad:], layer(x[:1, :s - pad])[0]) < 1e-5
    assert rel(y[1], layer(x[1:])[0]) < 1e-5
    np.testing.assert_array_equal(layer(xp, pos, attention_mask=mask.astype(bool)), y)
    with pytest.raises(ropeattn.ArgumentError, match="0 .padding. and 1"):
        layer(xp, attention_mask=mask * 2)
    with pytest.raises(ropeattn.ArgumentError, match="shape"):
        layer(xp, attention_mask=mask[:, 1:])


@pytest.fixture
def window_dir(tmp_path):
    """llama_default's weights read as Mistral's with a 4-token window."""
    cfg = json.loads((HF / "llama_default" / "config.json").read_text())
    cfg.update(model_type="mistral", architectures=["MistralForCausalLM"], sliding_window=4)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    shutil.copy(HF / "llama_default" / "model.safetensors", tmp_path)
    return tmp_path


def test_window_cache(window_dir):
    d, case, x, pos, y = load("llama_default")
    layer = ropeattn.Layer.from_pretrained(window_dir, layer=case["layer"])
    assert layer.config["window"] == 4 and layer.config["model_type"] == "mistral"
    yw = layer(x, positions=pos)
    # Tokens 0..3 see all their keys either way; later ones fewer.
    assert rel(yw[:, :4], y[:, :4]) < 1e-5 and rel(yw, y) > 1e-2
    s, p = x.shape[1], 6
    for window, capacity in ((False, s), (True, p)):
        cache = ropeattn.KVCache(layer, 2, capacity, window=window)
        assert cache.slots == (4 - 1 + p if window else s)
        got = [layer(x[:, :p], positions=pos[:, :p], cache=cache)]
        got += [layer(x[:, t:t + 1], positions=pos[:, t:t + 1], cache=cache)
                for t in range(p, s)]
        assert rel(np.concatenate(got, axis=1), yw) < 1e-5 and len(cache) == s
    # A window cache takes at most capacity tokens a call.
    cache = ropeattn.KVCache(layer, 2, 2, window=True)
    with pytest.raises(ropeattn.CacheFullError, match="ra_layer_forward_cached"):
        layer(x[:, :3], cache=cache)


def test_bad_inputs(tmp_path):
    layer, x, pos, _ = build("llama_default")
    missing = tmp_path / "missing.safetensors"
    with pytest.raises(ropeattn.FileError, match="No such file") as e:
        ropeattn.Layer.from_pretrained(missing)
    assert isinstance(e.value, OSError) and str(missing) in str(e.value)
    assert e.value.status is not None
    with pytest.raises(ropeattn.FileError, match="safetensors"):
        ropeattn.Layer.from_pretrained(tmp_path)  # a directory without weights
    (tmp_path / "bad.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{nonsense")
    with pytest.raises(ropeattn.FormatError, match="bad.safetensors"):
        ropeattn.Layer.from_pretrained(tmp_path / "bad.safetensors", theta=1e4)
    with pytest.raises(ropeattn.NotFoundError, match="no attention weights for layer 7"):
        ropeattn.Layer.from_pretrained(HF / "llama_default", layer=7)
    with pytest.raises(ropeattn.ArgumentError, match="layer"):
        ropeattn.Layer.from_pretrained(HF / "llama_default", layer=-2)
    with pytest.raises(ropeattn.ArgumentError, match="layout"):
        ropeattn.Layer.from_pretrained(HF / "llama_default", layer=1, layout="rotated")
    for name in ("position_ids", "vision", "token_types", "vision_windows"):
        # a truth taken: vision="False" built the vision encoder's layer
        with pytest.raises(ropeattn.ArgumentError, match=f"{name}: expected True or False"):
            ropeattn.Layer.from_pretrained(HF / "llama_default", layer=1, **{name: "False"})

    with pytest.raises(ropeattn.DtypeError, match="float32"):
        layer(x.astype(np.float64))
    with pytest.raises(ropeattn.DtypeError, match="ndarray"):
        layer(x.tolist())
    for bad in (x[..., :16], x[None], x[:, :0]):
        with pytest.raises(ropeattn.ArgumentError, match="expected shape"):
            layer(bad)
    with pytest.raises(ropeattn.ArgumentError, match="negative"):
        layer(x, positions=-1)
    with pytest.raises(ropeattn.ArgumentError, match="ra_layer_forward"):
        layer(x, positions=2**32)  # the library's check: beyond RA_MAX_POSITION

    s = x.shape[1]
    cache = ropeattn.KVCache(layer, 2, s)
    layer(x, positions=pos, cache=cache)
    with pytest.raises(ropeattn.CacheFullError, match="exceed the capacity") as e:
        layer(x[:, :1], cache=cache)
    assert isinstance(e.value, ropeattn.ArgumentError) and isinstance(e.value, ValueError)
    assert len(cache) == s  # unchanged
    with pytest.raises(ropeattn.ArgumentError, match="ra_layer_forward_cached"):
        layer(x[:1, :1], cache=cache)  # one sequence for a cache of two
    with pytest.raises(ropeattn.UnsupportedError, match="not with a cache"):
        layer(x, attention_mask=np.ones(x.shape[:2]), cache=cache)
    other = build("llama_default")[0]
    with pytest.raises(ropeattn.ArgumentError, match="another Layer"):
        other(x, cache=cache)
    # the cache's layer is read-only: once reassigned, another layer (of the
    # same shapes) appended its keys to this one's, silently
    with pytest.raises(AttributeError):
        cache.layer = other
    assert cache.layer is layer
    with pytest.raises(ropeattn.ArgumentError, match="^b: "):
        cache.length(True)  # a bool is no sequence number
    with pytest.raises(ropeattn.ArgumentError, match="sequence"):
        cache.length(2)
    with pytest.raises(ropeattn.DtypeError, match="float8_e4m3fn"):
        ropeattn.KVCache(layer, 2, s, dtype="uint8")
    with pytest.raises(ropeattn.ArgumentError, match="scale"):
        ropeattn.KVCache(layer, 2, s, dtype="int8", scale=0.5)
    with pytest.raises(ropeattn.ArgumentError, match="scale"):
        ropeattn.KVCache(layer, 2, s, dtype="float8_e4m3fn", scale=0)
    for tiny in (1e-45, 1e-40, 1e-50, 1e38, True):  # subnormal, 0, 448 s past a float; True ran as 1
        with pytest.raises(ropeattn.ArgumentError, match="normal float32"):
            ropeattn.KVCache(layer, 2, s, dtype="float8_e4m3fn", scale=tiny)
        with pytest.raises(ropeattn.ArgumentError, match="normal float32"):
            ropeattn.KVPool(layer, 4, dtype="float8_e4m3fn", scale=tiny)
    assert ropeattn.KVCache(layer, 2, s, dtype="float8_e4m3fn", scale=1.2e-38).slots == s
    assert ropeattn.KVCache(layer, 2, s, dtype="float8_e4m3fn", scale=0.25).slots == s
    with pytest.raises(ropeattn.ArgumentError, match="no sliding window"):
        ropeattn.KVCache(layer, 2, s, window=True)
    with pytest.raises(ropeattn.ArgumentError, match="window: expected True or False"):
        ropeattn.KVCache(layer, 2, s, window=None)
    with pytest.raises(ropeattn.ArgumentError, match="window: expected True or False"):
        ropeattn.KVPool(layer, 4).add(window="no")
    with pytest.raises(ropeattn.ArgumentError, match="capacity"):
        ropeattn.KVCache(layer, 2, 0)
    with pytest.raises(TypeError):
        ropeattn.KVCache("layer", 2, s)


def reference_freqs(dim, end, theta):
    """precompute_freqs_cis(dim, end, theta) of Meta's LLaMA code, in float64:
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        t = torch.arange(end)
        freqs = torch.outer(t, freqs).float()
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs)"""
    freqs = 1.0 / (theta ** (np.arange(0, dim, 2)[: dim // 2].astype(np.float64) / dim))
    angles = np.outer(np.arange(end, dtype=np.float64), freqs)
    return np.cos(angles), np.sin(angles)


@pytest.mark.parametrize("dim,end,theta", [(2, 1, 10000.0), (8, 17, 10000.0),
                                           (128, 300, 500000.0), (16, 70000, 1e6),
                                           (64, 4096, 10000.0)])
def test_freqs(dim, end, theta):
    """Within 1e-6 absolute of the float64 tables: the library forms each
    angle in double and rounds cos and sin once to float32 (half an ulp,
    under 6e-8), and documents 1e-6 up to position 2^32.  The reference code
    itself forms the angles in float32, which drifts with the position
    (about m * 6e-8 radians), so float64 is the oracle, not its float32."""
    cos, sin = ropeattn.freqs(dim, end, theta)
    assert cos.dtype == sin.dtype == np.float32
    assert cos.shape == sin.shape == (end, dim // 2)
    rc, rs = reference_freqs(dim, end, theta)
    assert np.max(np.abs(cos - rc)) < 1e-6 and np.max(np.abs(sin - rs)) < 1e-6


def test_freqs_arguments():
    cos, sin = ropeattn.freqs(8, 0)
    assert cos.shape == sin.shape == (0, 4)
    assert ropeattn.freqs(8, 5)[0].shape == (5, 4)  # theta 10000 by default
    np.testing.assert_array_equal(ropeattn.freqs(8, 5)[1], ropeattn.freqs(8, 5, 10000.0)[1])
    for args, match in [((7, 4), "odd"), ((0, 4), "dim 0"), ((8, -1), "end -1"),
                        ((8, 4, 0.0), "theta"), ((8, 4, float("nan")), "theta"),
                        ((8, 4, 1e-320), "subnormal"),  # as RotaryEmbedding and the CLI
                        ((8, 2**32 + 2), "2\\^32")]:
        with pytest.raises(ropeattn.ArgumentError, match=match):
            ropeattn.freqs(*args)
    with pytest.raises(ropeattn.ArgumentError, match="integer"):
        ropeattn.freqs(8.0, 4)


def layer_calls(layer, cache, x, pos, ctx):
    layer(x, positions=pos, context=ctx)
    layer(x[0], attention_mask=np.ones(x.shape[1], np.int64))
    cache.reset()
    layer(x[:, :4], positions=pos[:, :4], cache=cache, context=ctx)
    layer(x[:, 4:5], cache=cache)
    len(cache), cache.length(1), layer.config, layer.tensor_names
    for bad in (lambda: layer(x, cache=cache),  # full
                lambda: layer(x[..., :3]),
                lambda: layer(x, positions=2**32)):
        try:
            bad()
        except ropeattn.Error:
            pass


def test_no_reference_or_memory_growth():
    layer, x, pos, _ = build("llama_default")
    cache = ropeattn.KVCache(layer, 2, 8)
    with ropeattn.Context(threads=1) as ctx:
        objects = (layer, cache, x, pos, ctx)
        refs = [sys.getrefcount(o) for o in objects]
        for _ in range(50):  # warm caches
            layer_calls(layer, cache, x, pos, ctx)
        tracemalloc.start()
        for _ in range(50):
            layer_calls(layer, cache, x, pos, ctx)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            layer_calls(layer, cache, x, pos, ctx)
        for _ in range(100):  # building and dropping layers and caches
            ropeattn.KVCache(ropeattn.Layer.from_pretrained(HF / "llama_default", layer=1), 1, 4)
            try:
                ropeattn.Layer.from_pretrained(HF / "llama_default", layer=9)
            except ropeattn.NotFoundError:
                pass
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert [sys.getrefcount(o) for o in objects] == refs
    # a leak of one small object per call would be > 50 kB over 1000 calls
    assert grown < 16384, grown


def test_threads():
    """Eight Python threads share one Layer, each with its own KVCache (half
    with their own Context too), and one builds layers meanwhile: every
    result as computed alone.  (Within 1e-6 rather than bit for bit:
    OpenBLAS, under the projections, may split a product differently when
    called from several threads at once.)"""
    layer, x, pos, _ = build("llama_default")
    s = x.shape[1]

    def run(ctx):
        cache = ropeattn.KVCache(layer, 2, s)
        ys = [layer(x[:, :6], positions=pos[:, :6], cache=cache, context=ctx)]
        ys += [layer(x[:, t:t + 1], positions=pos[:, t:t + 1], cache=cache, context=ctx)
               for t in range(6, s)]
        return layer(x, positions=pos, context=ctx), np.concatenate(ys, axis=1)

    expect = run(None)

    def work(i, ctx):
        for _ in range(10):
            for got, want in zip(run(ctx), expect):
                if not np.max(np.abs(got - want)) <= 1e-6 * np.max(np.abs(want)):
                    return False
            if i == 0:
                ropeattn.Layer.from_pretrained(HF / "qwen2_bias", layer=0)
        return True

    errors = run_in_threads(work)
    assert errors == []


def test_context_and_gil_released():
    """The layer's own Context serves its calls; while one thread runs a
    long forward (about 0.1-0.5 s here), with or without a cache, the main
    thread wakes from 1 ms sleeps many times (a held GIL would allow one or
    two: see test_package.py's test_gil_released_during_kernels)."""
    with ropeattn.Context(threads=2) as ctx:
        layer = ropeattn.Layer.from_pretrained(HF / "llama_default", layer=1, context=ctx)
        assert layer.context is ctx
        x = np.random.default_rng(1).standard_normal((1, 8192, 32)).astype(np.float32)
        want = layer(x, context=None)
        for cache in (None, ropeattn.KVCache(layer, 1, 8192)):
            result = []
            wakeups = wakeups_during(lambda: result.append(layer(x, cache=cache)))
            assert wakeups >= 10, wakeups
            assert rel(result[0], want) < 1e-5
