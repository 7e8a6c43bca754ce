"""seed_torch.py — the seed's PyTorch code, timed for `ropeattn bench`.

    /usr/bin/python3 bench/seed_torch.py --threads N [--repeats R] [--only NAME,...]

Times, at torch.set_num_threads(N), the two pieces of the seed that the bench
has kernels for, copied from the seed (/work/shared/seeds/003_*.txt):

  rope_f32                      apply_rotary_emb on q [1, 4096, 32, 128] and
                                k [1, 4096, 8, 128] (float(), reshape, unbind,
                                the four products, stack, flatten, type_as)
  attention_prefill_f32_s512    the seed's non-flash attention core: repeat_kv,
  attention_prefill_f32_s2048   scores = q k^T / sqrt(d) + mask, softmax in
                                float, @ v; B 1, H 32, Hkv 8, D 128, causal

Each case runs once to warm up, then R times (at most 3 when the warm-up took
over a second); the median is reported.  Every call allocates its tensors
afresh, as the seed does: on this VM that is most of the time (first-touch
page faults are slow here), and it is what the seed's code costs.  Prints
one JSON object on stdout:

  {"torch_version": "...", "threads": N, "repeats": R,
   "cases": {"rope_f32": {"median_seconds": ...}, ...}}

or {"error": "..."} (exit status 0 either way: the bench decides what a
missing result means).  The attention core at S = 8192 is not run: the seed
materialises [1, 32, S, S] scores twice, 17 GiB at that length.
"""
import argparse
import json
import math
import sys
import time

ROPE_SEQ, HEADS, KV_HEADS, HEAD_DIM = 4096, 32, 8, 128


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default="rope_f32,attention_prefill_f32_s512,"
                                          "attention_prefill_f32_s2048")
    args = parser.parse_args()
    try:
        import torch
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        print(json.dumps({"error": f"import torch: {e}"}))
        return
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    # ---- the seed, verbatim apart from comments --------------------------
    def repeat_kv(x, n_rep):
        bs, slen, n_kv_heads, head_dim = x.shape
        if n_rep == 1:
            return x
        return (
            x[:, :, :, None, :]
            .expand(bs, slen, n_kv_heads, n_rep, head_dim)
            .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
        )

    def precompute_freqs_cis(dim, end, theta=10000.0):
        freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        t = torch.arange(end, device=freqs.device)
        freqs = torch.outer(t, freqs).float()
        return torch.cos(freqs), torch.sin(freqs)

    def reshape_for_broadcast(freqs_cis, x):
        ndim = x.ndim
        assert 0 <= 1 < ndim
        assert freqs_cis.shape == (x.shape[1], x.shape[-1])
        shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
        return freqs_cis.view(shape)

    def apply_rotary_emb(xq, xk, freqs_cos, freqs_sin):
        xq_r, xq_i = xq.float().reshape(xq.shape[:-1] + (-1, 2)).unbind(-1)
        xk_r, xk_i = xk.float().reshape(xk.shape[:-1] + (-1, 2)).unbind(-1)
        freqs_cos = reshape_for_broadcast(freqs_cos, xq_r)
        freqs_sin = reshape_for_broadcast(freqs_sin, xq_r)
        xq_out_r = xq_r * freqs_cos - xq_i * freqs_sin
        xq_out_i = xq_r * freqs_sin + xq_i * freqs_cos
        xk_out_r = xk_r * freqs_cos - xk_i * freqs_sin
        xk_out_i = xk_r * freqs_sin + xk_i * freqs_cos
        xq_out = torch.stack([xq_out_r, xq_out_i], dim=-1).flatten(3)
        xk_out = torch.stack([xk_out_r, xk_out_i], dim=-1).flatten(3)
        return xq_out.type_as(xq), xk_out.type_as(xk)

    def attention_core(xq, xk, xv, mask, n_rep, head_dim):
        """Attention.forward between apply_rotary_emb and wo, non-flash."""
        bsz, seqlen = xq.shape[0], xq.shape[1]
        xk = repeat_kv(xk, n_rep)
        xv = repeat_kv(xv, n_rep)
        xq = xq.transpose(1, 2)
        xk = xk.transpose(1, 2)
        xv = xv.transpose(1, 2)
        scores = torch.matmul(xq, xk.transpose(2, 3)) / math.sqrt(head_dim)
        scores = scores + mask[:, :, :seqlen, :seqlen]
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        output = torch.matmul(scores, xv)
        return output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)

    # ---- timing ------------------------------------------------------------
    def median_seconds(fn):
        start = time.perf_counter()
        fn()
        repeats = min(args.repeats, 3) if time.perf_counter() - start > 1 else args.repeats
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            fn()
            samples.append(time.perf_counter() - start)
        samples.sort()
        n = len(samples)
        return samples[n // 2] if n % 2 else 0.5 * (samples[n // 2 - 1] + samples[n // 2])

    def rope_case():
        xq = torch.rand(1, ROPE_SEQ, HEADS, HEAD_DIM) * 2 - 1
        xk = torch.rand(1, ROPE_SEQ, KV_HEADS, HEAD_DIM) * 2 - 1
        freqs_cos, freqs_sin = precompute_freqs_cis(HEAD_DIM, ROPE_SEQ)
        return median_seconds(lambda: apply_rotary_emb(xq, xk, freqs_cos, freqs_sin))

    def attention_case(seq):
        xq = torch.rand(1, seq, HEADS, HEAD_DIM) * 2 - 1
        xk = torch.rand(1, seq, KV_HEADS, HEAD_DIM) * 2 - 1
        xv = torch.rand(1, seq, KV_HEADS, HEAD_DIM) * 2 - 1
        mask = torch.triu(torch.full((1, 1, seq, seq), float("-inf")), diagonal=1)
        n_rep = HEADS // KV_HEADS
        return median_seconds(lambda: attention_core(xq, xk, xv, mask, n_rep, HEAD_DIM))

    cases = {
        "rope_f32": rope_case,
        "attention_prefill_f32_s512": lambda: attention_case(512),
        "attention_prefill_f32_s2048": lambda: attention_case(2048),
    }
    results = {}
    with torch.no_grad():
        for name in args.only.split(","):
            if name in cases:
                results[name] = {"median_seconds": cases[name]()}
    print(json.dumps({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                      "repeats": args.repeats, "cases": results}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - reported to the bench, which goes on
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.stdout.flush()
