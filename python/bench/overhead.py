"""overhead.py: what the Python binding adds to a call, against the same
call in C timed by ropeattn-bench in the same run (issue 21 item 5).

    PYTHONPATH=python /usr/bin/python3 python/bench/overhead.py [--bench build/ropeattn-bench]
                                                               [--threads 2] [--repeats 7]

Cases, the shapes of ropeattn-bench's:
  rope_decode_f32             q [1, 1, 32, 128] and k [1, 1, 8, 128] rotated in place at
                              position 4096, interleaved (two calls a run):
                              target: at most 2 us more per call than C
  attention_prefill_f32_s512  q [1, 512, 32, 128], k, v [1, 512, 8, 128], causal:
                              target: at most 1.05 x C's time
Each Python time is the median over `repeats` samples of the mean of a
batch of calls (enough calls for about 0.2 s); C's is the bench's median.
Both use a context of `threads` threads.  Exits 1 if a target is missed.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import ropeattn

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def c_medians(bench_path, names, threads, repeats):
    """{name: median seconds} from `ropeattn-bench --json`."""
    cmd = [bench_path, "--json", "--no-torch", "--threads", str(threads),
           "--repeats", str(repeats), "--only", ",".join(names)]
    records = json.loads(subprocess.run(cmd, check=True, capture_output=True,
                                        text=True).stdout)
    return {r["name"]: r["median_seconds"] for r in records if r["name"] in names}


def py_median(call, repeats):
    """Median over repeats of the mean time of a batch of calls (~0.2 s)."""
    call()
    start, n = time.perf_counter(), 0
    while time.perf_counter() - start < 0.05:
        call()
        n += 1
    batch = max(1, int(n * 4))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch):
            call()
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bench", default=os.path.join(ROOT, "build", "ropeattn-bench"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    ctx = ropeattn.Context(threads=args.threads)

    rope = ropeattn.RotaryEmbedding(128, layout="interleaved", table_size=8192)
    q1 = rng.standard_normal((1, 1, 32, 128)).astype(np.float32)
    k1 = rng.standard_normal((1, 1, 8, 128)).astype(np.float32)

    def rope_run():
        ropeattn.apply_rotary(q1, 4096, rope=rope, out=q1, context=ctx)
        ropeattn.apply_rotary(k1, 4096, rope=rope, out=k1, context=ctx)

    q = rng.standard_normal((1, 512, 32, 128)).astype(np.float32)
    k = rng.standard_normal((1, 512, 8, 128)).astype(np.float32)
    v = rng.standard_normal((1, 512, 8, 128)).astype(np.float32)

    def attention_run():
        ropeattn.attention(q, k, v, context=ctx)

    names = ["rope_decode_f32", "attention_prefill_f32_s512"]
    py = {"rope_decode_f32": py_median(rope_run, args.repeats),
          "attention_prefill_f32_s512": py_median(attention_run, args.repeats)}
    c = c_medians(args.bench, names, args.threads, args.repeats)
    print(f"ropeattn {ropeattn.__version__} (simd {ropeattn.simd()}), {args.threads} threads, "
          f"median of {args.repeats}")
    print(f"{'case':28s} {'C':>12s} {'Python':>12s}  overhead")
    ok = True
    per_call = (py["rope_decode_f32"] - c["rope_decode_f32"]) / 2
    ok &= per_call <= 2e-6
    print(f"{'rope_decode_f32':28s} {c['rope_decode_f32'] * 1e6:9.3f} us "
          f"{py['rope_decode_f32'] * 1e6:9.3f} us  {per_call * 1e6:.3f} us a call "
          f"(target <= 2 us)")
    ratio = py["attention_prefill_f32_s512"] / c["attention_prefill_f32_s512"]
    ok &= ratio <= 1.05
    print(f"{'attention_prefill_f32_s512':28s} {c['attention_prefill_f32_s512'] * 1e3:9.3f} ms "
          f"{py['attention_prefill_f32_s512'] * 1e3:9.3f} ms  x{ratio:.3f} (target <= 1.05)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
