"""Layer.from_pretrained on a block-FP8 checkpoint (F8_E4M3 weights, a
weight_scale_inv beside each, config.json's quantization_config) gives the
same bits as the same checkpoint stored in BF16 after dequantizing it here
as transformers does (e4m3 value times its [3, 5] block's scale in float32,
rounded to bfloat16, nearest-even); a NaN code is refused."""
import json
import struct

import numpy as np
import pytest

import ropeattn

DIM, H, K, D = 16, 2, 1, 8
BLOCK = (3, 5)
CODES = np.arange(256)
EXP, MAN = (CODES >> 3) & 15, CODES & 7
VALUES = np.where(EXP == 0, MAN * 2.0 ** -9, (1 + MAN / 8) * 2.0 ** (EXP - 7))
VALUES = np.where(CODES & 0x80, -VALUES, VALUES).astype(np.float32)  # exact in float32


def write(path, tensors):
    """tensors: {name: (dtype name, array)}."""
    header, data = {}, b""
    for name, (dtype, a) in tensors.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape),
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)


def bf16_bits(a):
    """float32 -> bfloat16 bits, to nearest, ties to even (no NaN here)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def checkpoint(tmp_path, rng, nan=False):
    rows = {"q_proj": H * D, "k_proj": K * D, "v_proj": K * D, "o_proj": DIM}
    fp8, bf16 = {}, {}
    for proj, r in rows.items():
        cols = H * D if proj == "o_proj" else DIM
        codes = rng.integers(0, 256, (r, cols), dtype=np.uint8)
        codes[(codes & 0x7F) == 0x7F] ^= 1
        if nan and proj == "v_proj":
            codes[1, 2] = 0xFF
        grid = (-(-r // BLOCK[0]), -(-cols // BLOCK[1]))
        scales = (rng.uniform(1, 2, grid) * 2.0 ** -9).astype(np.float32)
        full = np.repeat(np.repeat(scales, BLOCK[0], 0), BLOCK[1], 1)[:r, :cols]
        name = "model.layers.0.self_attn.%s.weight" % proj
        fp8[name] = ("F8_E4M3", codes)
        fp8[name + "_scale_inv"] = ("F32", scales)
        bf16[name] = ("BF16", bf16_bits(VALUES[codes] * full))  # one float32 product
    config = {"model_type": "llama", "hidden_size": DIM, "num_attention_heads": H,
              "num_key_value_heads": K, "head_dim": D, "torch_dtype": "bfloat16"}
    for sub, tensors, quant in (("fp8", fp8, True), ("bf16", bf16, False)):
        d = tmp_path / sub
        d.mkdir()
        write(d / "model.safetensors", tensors)
        c = dict(config, quantization_config={
            "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
            "weight_block_size": list(BLOCK)}) if quant else config
        (d / "config.json").write_text(json.dumps(c))
    return tmp_path / "fp8", tmp_path / "bf16"


def test_fp8_equals_bf16_dequantized(tmp_path):
    rng = np.random.default_rng(8)
    fp8, bf16 = checkpoint(tmp_path, rng)
    x = rng.normal(0, 1, (2, 7, DIM)).astype(np.float32)
    a = ropeattn.Layer.from_pretrained(fp8, layer=0, n_tokens=7)
    b = ropeattn.Layer.from_pretrained(bf16, layer=0, n_tokens=7)
    ya, yb = a(x), b(x)
    assert np.all(np.isfinite(ya)) and np.abs(ya).max() > 0
    assert ya.tobytes() == yb.tobytes()


def test_fp8_nan_code_refused(tmp_path):
    fp8, _ = checkpoint(tmp_path, np.random.default_rng(9), nan=True)
    with pytest.raises(ropeattn.FormatError, match="v_proj.weight.*NaN code 0xff"):
        ropeattn.Layer.from_pretrained(fp8, layer=0, n_tokens=7)
