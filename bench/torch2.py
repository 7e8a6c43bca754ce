"""torch2.py — PyTorch 2 timed beside the library, for `ropeattn bench`'s
"vs torch2" column, and a Llama-shaped model end to end.

    .venv-hf/bin/python bench/torch2.py --threads N [--repeats R] [--only NAME,...]
    .venv-hf/bin/python bench/torch2.py --threads N --e2e [--prompt 2048] [--new 128]
    .venv-hf/bin/python bench/torch2.py --markdown BENCH.json [E2E.json]

The first form times, at torch.set_num_threads(N), what a PyTorch 2 user on
a CPU runs for the bench's cases of the same names (the library's side is
timed by the bench itself, in the same run, on the same shapes and the same
uniform [-1, 1) values' distribution; each side in its own layout):

  attention_prefill_{f32,bf16}_s{512,2048,8192}
        F.scaled_dot_product_attention(q, k, v, is_causal=True): q [1, 32, S,
        128], k, v [1, 8, S, 128] ([B, H, S, D], contiguous: SDPA's own
        layout), float32 or bfloat16 q, k, v; GQA two ways, the faster
        reported: enable_gqa=True, or transformers' repeat_kv first (its copy
        timed).  S 8192 runs only the way that won at S 2048 (when timed).
  attention_decode_f32_l{4096,16384}, attention_decode_bf16_l16384
        one token: q [1, 32, 1, 128] against cached k, v [1, 8, L, 128]
        (a DynamicCache's tensors), no mask; GQA two ways, the faster
        reported: enable_gqa=True, or transformers' pack_gqa (q as [1, 8,
        4, 128]).  The bf16 case's q is bf16 too (the library's is f32).
  rope_half_f32
        transformers' Llama apply_rotary_pos_emb(q, k, cos, sin) on q [1,
        4096, 32, 128] and k [1, 4096, 8, 128] passed as [B, H, S, D] views
        (as the model passes them), cos, sin [1, 4096, 128] precomputed (the
        model computes them once for all layers): eager, and under
        torch.compile (reported as compiled_seconds, beside compile_seconds,
        its first call; compile_error where it does not compile).

Each case runs once to warm up, then R times (at most 3 when the warm-up
took over a second, 1 over five seconds); the median is reported, under
torch.no_grad().  Prints one JSON object on stdout:

  {"torch_version": "...", "threads": N, "repeats": R,
   "cases": {"attention_prefill_f32_s512": {"median_seconds": ..., "variant":
             "enable_gqa", "variants": {"enable_gqa": ..., "repeat_kv": ...}}, ...}}

or {"error": "..."}, exit status 0 either way (the bench decides what a
missing result means).

--e2e: a Llama-shaped model with random weights (8 layers, hidden 2048, 16
heads, 4 kv heads, head_dim 128, intermediate 5632 as TinyLlama's, Llama's
ratio at hidden 2048; vocabulary 32000; float32), saved once with
save_pretrained and loaded with from_pretrained(attn_implementation=...) for
"sdpa" and for "ropeattn" (import ropeattn.transformers registers it);
each greedy-generates --new tokens after a --prompt-token random prompt,
after a short warm-up generate.  The prefill time is from the call to the
first token's logits; the decode rate counts the --new - 1 steps after.
The two runs' first-token logits are compared (rel_diff: max |a - b| / max
|a|) and the greedy tokens (same_tokens: the common prefix's length).
Prints {"torch_version", "transformers_version", "ropeattn_file", "threads",
"config", "runs": {"sdpa": {"prefill_seconds", "prefill_tokens_per_s",
"decode_seconds", "decode_tokens_per_s"}, "ropeattn": {...}}, "rel_diff",
"same_tokens"} or {"error": ...}.

--markdown: the README's comparison table from `ropeattn bench --json`'s
records (with torch2_seconds) and the --e2e JSON.
"""
import argparse
import json
import sys
import time

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
ROPE_SEQ = 4096
PREFILL = {f"attention_prefill_{dt}_s{s}": (dt, s) for dt in ("f32", "bf16")
           for s in (512, 2048, 8192)}
DECODE = {"attention_decode_f32_l4096": ("f32", 4096),
          "attention_decode_f32_l16384": ("f32", 16384),
          "attention_decode_bf16_l16384": ("bf16", 16384)}
ROPE = ("rope_half_f32",)
ALL_CASES = list(PREFILL) + list(DECODE) + list(ROPE)

# The end-to-end model: TinyLlama-1.1B's widths at 8 layers.
E2E_CONFIG = dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=8,
                  num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                  max_position_embeddings=4096)
WARMUP_PROMPT, WARMUP_NEW = 64, 4


def median_seconds(fn, repeats):
    """fn's median time over repeats calls after one warm-up call (at most
    3 calls when the warm-up took over 1 s, 1 over 5 s)."""
    start = time.perf_counter()
    fn()
    warm = time.perf_counter() - start
    repeats = min(repeats, 1 if warm > 5 else 3 if warm > 1 else repeats)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    samples.sort()
    n = len(samples)
    return samples[n // 2] if n % 2 else 0.5 * (samples[n // 2 - 1] + samples[n // 2])


def uniform(torch, *shape, dtype):
    return (torch.rand(*shape) * 2 - 1).to(dtype)


def time_variants(variants, repeats):
    """{"median_seconds", "variant", "variants"} for the fastest of
    variants {name: fn}."""
    times = {name: median_seconds(fn, repeats) for name, fn in variants.items()}
    best = min(times, key=times.get)
    return {"median_seconds": times[best], "variant": best, "variants": times}


def prefill_case(torch, dtype, seq, repeats, only_variant=None):
    from transformers.integrations.sdpa_attention import repeat_kv
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q = uniform(torch, 1, HEADS, seq, HEAD_DIM, dtype=dtype)
    k = uniform(torch, 1, KV_HEADS, seq, HEAD_DIM, dtype=dtype)
    v = uniform(torch, 1, KV_HEADS, seq, HEAD_DIM, dtype=dtype)
    rep = HEADS // KV_HEADS
    variants = {
        "enable_gqa": lambda: sdpa(q, k, v, is_causal=True, enable_gqa=True),
        "repeat_kv": lambda: sdpa(q, repeat_kv(k, rep), repeat_kv(v, rep), is_causal=True),
    }
    if only_variant:
        variants = {only_variant: variants[only_variant]}
    return time_variants(variants, repeats)


def decode_case(torch, dtype, length, repeats):
    from transformers.integrations.sdpa_attention import pack_gqa
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q = uniform(torch, 1, HEADS, 1, HEAD_DIM, dtype=dtype)
    k = uniform(torch, 1, KV_HEADS, length, HEAD_DIM, dtype=dtype)
    v = uniform(torch, 1, KV_HEADS, length, HEAD_DIM, dtype=dtype)
    rep = HEADS // KV_HEADS
    variants = {
        "enable_gqa": lambda: sdpa(q, k, v, enable_gqa=True),
        "pack_gqa": lambda: sdpa(pack_gqa(q, rep), k, v),
    }
    return time_variants(variants, repeats)


def rope_case(torch, repeats):
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
    q = uniform(torch, 1, ROPE_SEQ, HEADS, HEAD_DIM, dtype=torch.float32).transpose(1, 2)
    k = uniform(torch, 1, ROPE_SEQ, KV_HEADS, HEAD_DIM, dtype=torch.float32).transpose(1, 2)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    angles = torch.outer(torch.arange(ROPE_SEQ).float(), inv_freq)
    emb = torch.cat((angles, angles), dim=-1)[None]  # [1, S, D], as LlamaRotaryEmbedding's
    cos, sin = emb.cos(), emb.sin()
    result = {"median_seconds": median_seconds(lambda: apply_rotary_pos_emb(q, k, cos, sin),
                                               repeats), "variant": "eager"}
    try:
        compiled = torch.compile(apply_rotary_pos_emb)
        start = time.perf_counter()
        compiled(q, k, cos, sin)
        result["compile_seconds"] = time.perf_counter() - start
        result["compiled_seconds"] = median_seconds(lambda: compiled(q, k, cos, sin), repeats)
    except Exception as e:  # noqa: BLE001 - reported: torch.compile may not run here
        result["compile_error"] = f"{type(e).__name__}: {str(e)[:300]}"
    return result


def kernel_cases(torch, names, repeats):
    results = {}
    for name in names:
        if name in PREFILL:
            dt, seq = PREFILL[name]
            dtype = torch.float32 if dt == "f32" else torch.bfloat16
            won = results.get(f"attention_prefill_{dt}_s2048", {}).get("variant")
            results[name] = prefill_case(torch, dtype, seq, repeats, won if seq > 2048 else None)
        elif name in DECODE:
            dt, length = DECODE[name]
            results[name] = decode_case(torch, torch.float32 if dt == "f32" else torch.bfloat16,
                                        length, repeats)
        elif name in ROPE:
            results[name] = rope_case(torch, repeats)
    return results


# ---- end to end ------------------------------------------------------------

def generate_timed(torch, model, prompt, new_tokens):
    """Greedy generate with a timestamp at each step's logits: (prefill
    seconds, decode seconds of the steps after the first, tokens, first
    logits)."""
    from transformers import LogitsProcessor, LogitsProcessorList

    class Stamp(LogitsProcessor):
        def __init__(self):
            self.times = []

        def __call__(self, input_ids, scores):
            self.times.append(time.perf_counter())
            return scores

    stamp = Stamp()
    start = time.perf_counter()
    out = model.generate(prompt, attention_mask=torch.ones_like(prompt),
                         max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                         do_sample=False, logits_processor=LogitsProcessorList([stamp]),
                         return_dict_in_generate=True, output_logits=True)
    if len(stamp.times) != new_tokens:
        raise RuntimeError(f"generate made {len(stamp.times)} tokens, not {new_tokens}")
    return (stamp.times[0] - start, stamp.times[-1] - stamp.times[0],
            out.sequences[0, prompt.shape[1]:], out.logits[0][0])


def e2e(torch, args):
    import tempfile
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    import ropeattn
    import ropeattn.transformers  # noqa: F401 - registers attn_implementation="ropeattn"
    torch.manual_seed(0)
    config = LlamaConfig(**E2E_CONFIG, eos_token_id=None, pad_token_id=0)
    prompt = torch.randint(0, config.vocab_size, (1, args.prompt))
    warm_prompt = prompt[:, :WARMUP_PROMPT]
    runs, tokens, logits = {}, {}, {}
    with tempfile.TemporaryDirectory(prefix="ropeattn-torch2-") as path:
        LlamaForCausalLM(config).save_pretrained(path)
        for impl in ("sdpa", "ropeattn"):
            model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=impl,
                                                         dtype=torch.float32).eval()
            with torch.no_grad():
                generate_timed(torch, model, warm_prompt, WARMUP_NEW)
                prefill, decode, tokens[impl], logits[impl] = generate_timed(
                    torch, model, prompt, args.new)
            runs[impl] = {"prefill_seconds": prefill, "prefill_tokens_per_s": args.prompt / prefill,
                          "decode_seconds": decode,
                          "decode_tokens_per_s": (args.new - 1) / decode}
            del model
    a, b = logits["sdpa"], logits["ropeattn"]
    same = tokens["sdpa"] == tokens["ropeattn"]
    return {"torch_version": torch.__version__, "transformers_version": transformers.__version__,
            "ropeattn_file": ropeattn.__file__, "threads": torch.get_num_threads(),
            "config": {**E2E_CONFIG, "dtype": "float32", "prompt": args.prompt,
                       "new_tokens": args.new},
            "runs": runs, "rel_diff": float((a - b).abs().max() / a.abs().max()),
            "same_tokens": int(same.long().cumprod(0).sum())}


# ---- the README's table ------------------------------------------------------

def markdown(bench_path, e2e_path):
    """Lines of the comparison table: each case with a torch2 time, ours,
    and the ratio; then the end-to-end rows."""
    records = {r["name"]: r for r in json.load(open(bench_path))}
    lines = ["| case | PyTorch 2 | ropeattn | speed-up |", "| --- | ---: | ---: | ---: |"]

    def ms(seconds):
        return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"

    for name in ALL_CASES:
        r = records.get(name)
        if not r or r.get("torch2_seconds") is None:
            continue
        ours = r["median_seconds"]
        lines.append(f"| {name} | {ms(r['torch2_seconds'])} | {ms(ours)} | "
                     f"{r['torch2_seconds'] / ours:.2f}x |")
        if r.get("torch2_compiled_seconds") is not None:
            lines.append(f"| {name}, torch.compile | {ms(r['torch2_compiled_seconds'])} | "
                         f"{ms(ours)} | {r['torch2_compiled_seconds'] / ours:.2f}x |")
    if e2e_path:
        e = json.load(open(e2e_path))
        if "runs" in e:
            for phase in ("prefill", "decode"):
                key = f"{phase}_tokens_per_s"
                t, o = e["runs"]["sdpa"][key], e["runs"]["ropeattn"][key]
                lines.append(f"| Llama 8L/2048 {phase} (tokens/s) | {t:.3g} | {o:.3g} | "
                             f"{o / t:.2f}x |")
        else:
            lines.append(f"| end to end | not measured: {e.get('error')} | | |")
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default=",".join(ALL_CASES))
    parser.add_argument("--e2e", action="store_true")
    parser.add_argument("--prompt", type=int, default=2048)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--markdown", nargs="+", metavar="JSON")
    args = parser.parse_args()
    if args.markdown:
        print("\n".join(markdown(args.markdown[0], args.markdown[1] if len(args.markdown) > 1
                                 else None)))
        return
    if not args.threads or args.threads < 1 or args.new < 2 or args.prompt < WARMUP_PROMPT:
        raise ValueError("--threads N >= 1 is required; --new >= 2; "
                         f"--prompt >= {WARMUP_PROMPT}")
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        print(json.dumps({"error": f"import torch: {e}"}))
        return
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.e2e:
        print(json.dumps(e2e(torch, args)))
        return
    unknown = [n for n in args.only.split(",") if n not in ALL_CASES]
    if unknown:
        raise ValueError(f"--only: unknown cases {unknown} (known: {ALL_CASES})")
    with torch.no_grad():
        results = kernel_cases(torch, args.only.split(","), args.repeats)
    print(json.dumps({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                      "repeats": args.repeats, "cases": results}))


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # noqa: BLE001 - reported to the bench, which goes on
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.stdout.flush()
