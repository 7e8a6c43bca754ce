"""st_read.py: reads .safetensors files for the shell tests' checks (numpy).

read_raw(path): {name: (dtype, shape, bytes)} for every tensor.
read_f32(path): {name: numpy array} for files of F32 tensors only.
"""
import json
import struct

import numpy as np


def read_raw(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        lo, hi = meta["data_offsets"]
        out[name] = (meta["dtype"], tuple(meta["shape"]), data[lo:hi])
    return out


def read_f32(path):
    out = {}
    for name, (dtype, shape, data) in read_raw(path).items():
        assert dtype == "F32", (name, dtype)
        out[name] = np.frombuffer(data, np.float32).reshape(shape)
    return out
