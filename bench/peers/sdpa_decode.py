"""sdpa_decode.py — one decode step of PyTorch 2's scaled_dot_product_attention
beside ropeattn's ra_attention_decode (libropeattn.so through ctypes), in
one process, on the same values, at the same thread count, samples
alternating: the PyTorch twin of bench/peers/ggml_decode.c.

    .venv-hf/bin/python bench/peers/sdpa_decode.py --threads N --lib build/libropeattn.so
        [--repeats R] [--only CASE,...] [--side ours|sdpa]

Cases {f32,bf16}_l{4096,16384,32768}: one query token, H 32, Hkv 8, D 128,
L cached tokens, K and V uniform in [-1, 1).  SDPA: q [1, 32, 1, 128] on k,
v [1, 8, L, 128] contiguous (a DynamicCache's tensors), float32 or
bfloat16 (q too), GQA two ways as bench/torch2.py's decode cases (enable_gqa,
or transformers' pack_gqa), the faster in one timed sample kept.  ropeattn:
a cache of that dtype filled by one ra_kv_cache_append of the same f32
values (rope NULL), q f32.  Each runs once to warm up and to be checked
(heads 0 and 31 against attention in float64 over the f32 values: f32
within 1e-4, bf16 within 2e-3, ggml_decode.c's tolerances), then R rounds
of the two, each first in turn, 20 ms apart; medians reported (--side:
one side's R samples alone, the other's seconds null: each side's own
time, to compare with the alternation's).  Prints one
JSON object per case a line: {"case", "threads", "torch_version",
"torch_cpu" (torch.backends.cpu.get_cpu_capability(): the vector kernels
PyTorch dispatches to on this CPU, "AVX2" or "AVX512"), "bytes",
"ours_seconds", "sdpa_seconds", "sdpa_variant", "ours_err", "sdpa_err"}
(bytes: the K and V read once, the same for both); exit 1 with a message
on a failed check or call.
"""
import argparse
import ctypes
import json
import sys
import time

import torch
from transformers.integrations.sdpa_attention import pack_gqa

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
CASES = {f"{dt}_l{n}": (dt, n) for dt in ("f32", "bf16") for n in (4096, 16384, 32768)}
RA_F32, RA_BF16 = 0, 2
TOL = {"f32": 1e-4, "bf16": 2e-3}
GAP = 0.02


class Tensor(ctypes.Structure):  # ra_tensor
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int),
                ("shape", ctypes.c_int64 * 4), ("stride", ctypes.c_int64 * 4)]


def view(t, code):
    """An ra_tensor of contiguous torch tensor t [B, S, heads, D]."""
    assert t.is_contiguous() and t.dim() == 4
    return Tensor(t.data_ptr(), code, (ctypes.c_int64 * 4)(*t.shape),
                  (ctypes.c_int64 * 4)(*t.stride()))


class Ours:
    """A context and a cache of dtype dt holding k, v [1, L, Hkv, D] f32."""

    def __init__(self, lib, threads, dt, k, v, q):
        self.lib, self.ctx, self.cache = lib, ctypes.c_void_p(), ctypes.c_void_p()
        self.q, self.out = q, torch.zeros_like(q)
        self.check(lib.ra_context_create(ctypes.byref(self.ctx), threads), "context")
        code = RA_F32 if dt == "f32" else RA_BF16
        self.check(lib.ra_kv_cache_create(ctypes.byref(self.cache), ctypes.c_int64(1),
                                          ctypes.c_int64(k.shape[1]), ctypes.c_int64(KV_HEADS),
                                          ctypes.c_int64(HEAD_DIM), code), "cache")
        kt, vt = view(k, RA_F32), view(v, RA_F32)
        self.check(lib.ra_kv_cache_append(self.ctx, self.cache, None, None, ctypes.byref(kt),
                                          ctypes.byref(vt), None, None), "append")
        self.qt, self.outt = view(q, RA_F32), view(self.out, RA_F32)

    def check(self, status, what):
        if status:
            self.lib.ra_last_error.restype = ctypes.c_char_p
            sys.exit(f"sdpa_decode.py: ropeattn {what}: status {status}: "
                     f"{self.lib.ra_last_error().decode()}")

    def __call__(self):
        self.check(self.lib.ra_attention_decode(self.ctx, self.cache, ctypes.byref(self.outt),
                                                ctypes.byref(self.qt), None, None), "decode")
        return self.out

    def close(self):
        self.lib.ra_kv_cache_destroy(self.cache)
        self.lib.ra_context_destroy(self.ctx)


def largest_error(out, exact):
    """max |out - exact| over heads 0 and H - 1; out, exact [H, D]."""
    rows = [0, HEADS - 1]
    return float((out.float()[rows] - exact[rows]).abs().max())


def timed(fn):
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    time.sleep(GAP)
    return seconds


def median(samples):
    s, n = sorted(samples), len(samples)
    return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def run_case(lib, threads, repeats, name, side):
    dt, length = CASES[name]
    dtype = torch.float32 if dt == "f32" else torch.bfloat16
    torch.manual_seed(0)
    k, v = (torch.rand(1, length, KV_HEADS, HEAD_DIM) * 2 - 1 for _ in range(2))
    q = torch.rand(1, 1, HEADS, HEAD_DIM) * 2 - 1
    ours = Ours(lib, threads, dt, k, v, q)
    # SDPA's operands: [B, H, S, D] contiguous, in the case's dtype
    ks, vs = (x.transpose(1, 2).contiguous().to(dtype) for x in (k, v))
    qs = q.transpose(1, 2).contiguous().to(dtype)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    rep = HEADS // KV_HEADS
    variants = {"enable_gqa": lambda: sdpa(qs, ks, vs, enable_gqa=True),
                "pack_gqa": lambda: sdpa(pack_gqa(qs, rep), ks, vs).reshape(1, HEADS, 1, HEAD_DIM)}
    kd, vd = (x.transpose(1, 2).double() for x in (k, v))
    exact = sdpa(q.transpose(1, 2).double(), kd, vd, enable_gqa=True)[0, :, 0]
    errors = {"ours": largest_error(ours()[0, 0], exact)}
    for variant, fn in variants.items():
        errors[variant] = largest_error(fn()[0, :, 0], exact)
    for who, err in errors.items():
        if not err <= TOL[dt]:
            sys.exit(f"sdpa_decode.py: {name}: {who} is off by {err:g} (tolerance {TOL[dt]:g})")
    once = {variant: timed(fn) for variant, fn in variants.items()}
    best = min(once, key=once.get)
    samples = {"ours": [], "sdpa": []}
    fns = {"ours": ours, "sdpa": variants[best]}
    for r in range(repeats):
        for who in (("ours", "sdpa") if r % 2 == 0 else ("sdpa", "ours")):
            if side in (None, who):
                samples[who].append(timed(fns[who]))
    ours.close()
    return {"case": name, "threads": threads, "torch_version": torch.__version__,
            "torch_cpu": torch.backends.cpu.get_cpu_capability(),
            "bytes": 2 * length * KV_HEADS * HEAD_DIM * (4 if dt == "f32" else 2),
            "ours_seconds": median(samples["ours"]) if samples["ours"] else None,
            "sdpa_seconds": median(samples["sdpa"]) if samples["sdpa"] else None,
            "sdpa_variant": best, "ours_err": errors["ours"], "sdpa_err": errors[best]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--lib", required=True)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--only", default=",".join(CASES))
    parser.add_argument("--side", choices=("ours", "sdpa"))
    args = parser.parse_args()
    names = args.only.split(",")
    unknown = [n for n in names if n not in CASES]
    if unknown or args.threads < 1 or args.repeats < 1:
        sys.exit(f"sdpa_decode.py: --threads N >= 1, --repeats R >= 1, --only of {list(CASES)}"
                 + (f" (unknown: {unknown})" if unknown else ""))
    torch.set_num_threads(args.threads)
    lib = ctypes.CDLL(args.lib)
    with torch.no_grad():
        for name in names:
            print(json.dumps(run_case(lib, args.threads, args.repeats, name, args.side)), flush=True)


if __name__ == "__main__":
    main()
