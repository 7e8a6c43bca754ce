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
  attention_decode_{f32,bf16}_l{4096,16384,32768}
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
ratio at hidden 2048; vocabulary 32000; float32), saved with
save_pretrained and loaded once with from_pretrained(attn_implementation=
"ropeattn") (import ropeattn.transformers registers it), then switched
between "sdpa" and "ropeattn" with set_attn_implementation (the same
weights in memory): after a short warm-up generate for each, --rounds
rounds (default 1) of one greedy generate of --new tokens after a
--prompt-token random prompt for each, alternating.  The prefill time is
from the call to the first token's logits; the decode rate counts the
--new - 1 steps after; the fastest round of each is reported.  The time
inside transformers' attention function (the "sdpa" or "ropeattn" entry
of its AttentionInterface) is summed apart, for prefill and for decode:
the rest (projections, MLP, norms, RoPE, the cache) is the same code in
both.  The last round's first-token logits are compared (rel_diff: max |a
- b| / max |a|) and its greedy tokens (same_tokens: the common prefix's
length).  Prints {"torch_version", "transformers_version",
"ropeattn_file", "threads", "config", "runs": {"sdpa": {"prefill_seconds",
"prefill_tokens_per_s", "prefill_attention_seconds", "decode_seconds",
"decode_tokens_per_s", "decode_attention_seconds"}, "ropeattn": {...}},
"rounds" (every round's), "rel_diff", "same_tokens"} or {"error": ...}.

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
DECODE = {f"attention_decode_{dt}_l{n}": (dt, n) for dt in ("f32", "bf16")
          for n in (4096, 16384, 32768)}
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


class AttentionTimer:
    """Within `with`, every call of transformers' attention function for
    implementation impl is timed: seconds["prefill"] (calls of more than one
    query) and seconds["decode"]."""

    def __init__(self, impl):
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
        self.functions, self.impl = ALL_ATTENTION_FUNCTIONS, impl
        self.seconds = {"prefill": 0.0, "decode": 0.0}

    def __enter__(self):
        inner = self.functions[self.impl]

        def timed(module, query, *args, **kwargs):
            start = time.perf_counter()
            out = inner(module, query, *args, **kwargs)
            phase = "prefill" if query.shape[2] > 1 else "decode"
            self.seconds[phase] += time.perf_counter() - start
            return out

        self.functions[self.impl] = timed  # this instance's own mapping, over the global one
        return self

    def __exit__(self, *exc):
        del self.functions[self.impl]


def timed_round(torch, model, impl, prompt, new_tokens):
    """One timed generate with model set to impl: (its run's record, its
    tokens, its first logits)."""
    model.set_attn_implementation(impl)
    with AttentionTimer(impl) as attention:
        prefill, decode, tokens, logits = generate_timed(torch, model, prompt, new_tokens)
    run = {"prefill_seconds": prefill, "prefill_tokens_per_s": prompt.shape[1] / prefill,
           "prefill_attention_seconds": attention.seconds["prefill"],
           "decode_seconds": decode, "decode_tokens_per_s": (new_tokens - 1) / decode,
           "decode_attention_seconds": attention.seconds["decode"]}
    return run, tokens, logits


def e2e(torch, args):
    import tempfile
    import transformers
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
    import ropeattn
    import ropeattn.transformers  # noqa: F401 - registers attn_implementation="ropeattn"
    torch.manual_seed(0)
    config = LlamaConfig(**E2E_CONFIG, eos_token_id=None, pad_token_id=0)
    prompt = torch.randint(0, config.vocab_size, (1, args.prompt))
    with tempfile.TemporaryDirectory(prefix="ropeattn-torch2-") as path:
        LlamaForCausalLM(config).save_pretrained(path)
        model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="ropeattn",
                                                     dtype=torch.float32).eval()
    rounds, tokens, logits = {"sdpa": [], "ropeattn": []}, {}, {}
    with torch.no_grad():
        for impl in rounds:
            model.set_attn_implementation(impl)
            generate_timed(torch, model, prompt[:, :WARMUP_PROMPT], WARMUP_NEW)
        for _ in range(args.rounds):
            for impl in rounds:
                run, tokens[impl], logits[impl] = timed_round(torch, model, impl, prompt,
                                                              args.new)
                rounds[impl].append(run)
    a, b = logits["sdpa"], logits["ropeattn"]
    same = tokens["sdpa"] == tokens["ropeattn"]
    return {"torch_version": torch.__version__, "transformers_version": transformers.__version__,
            "ropeattn_file": ropeattn.__file__, "threads": torch.get_num_threads(),
            "config": {**E2E_CONFIG, "dtype": "float32", "prompt": args.prompt,
                       "new_tokens": args.new},
            "runs": {impl: best_round(runs) for impl, runs in rounds.items()},
            "rounds": rounds, "rel_diff": float((a - b).abs().max() / a.abs().max()),
            "same_tokens": int(same.long().cumprod(0).sum())}


def best_round(runs):
    """The fastest prefill and the fastest decode of an implementation's
    rounds, each with its attention time."""
    best = {}
    for phase in ("prefill", "decode"):
        run = min(runs, key=lambda r: r[f"{phase}_seconds"])
        best.update({key: value for key, value in run.items() if key.startswith(phase)})
    return best


# ---- the README's table ------------------------------------------------------

# Rows of the table: a label and the bench records whose times it shows
# (side by side, "f32 / bf16"); "rope_half_f32@compiled" is the same case
# against torch.compile.
TABLE_ROWS = (
    ("RoPE q, k [1, 4096, 32 + 8, 128]: eager / torch.compile",
     ("rope_half_f32", "rope_half_f32@compiled")),
    ("attention prefill S 512: f32 / bf16",
     ("attention_prefill_f32_s512", "attention_prefill_bf16_s512")),
    ("attention prefill S 2048: f32 / bf16",
     ("attention_prefill_f32_s2048", "attention_prefill_bf16_s2048")),
    ("attention prefill S 8192: f32 / bf16",
     ("attention_prefill_f32_s8192", "attention_prefill_bf16_s8192")),
    ("decode over 4096 tokens: f32", ("attention_decode_f32_l4096",)),
    ("decode over 16384 tokens: f32 / bf16",
     ("attention_decode_f32_l16384", "attention_decode_bf16_l16384")),
)


def short_time(seconds):
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def table_row(records, label, names):
    """One line: PyTorch 2's times, ours, and their ratios, " / " between
    the names' ("-" where one was not measured); None if none was."""
    theirs, ours, ratios = [], [], []
    for name in names:
        case, _, compiled = name.partition("@")
        r = records.get(case, {})
        t = r.get("torch2_compiled_seconds" if compiled else "torch2_seconds")
        o = r.get("median_seconds")
        theirs.append(short_time(t) if t else "-")
        ours.append(short_time(o) if o else "-")
        ratios.append(f"{t / o:.2f}x" if t and o else "-")
    if all(t == "-" for t in theirs):
        return None
    if len(set(ours)) == 1:
        ours = ours[:1]
    return f"| {label} | {' / '.join(theirs)} | {' / '.join(ours)} | {' / '.join(ratios)} |"


def markdown(bench_path, e2e_path):
    """Lines of the comparison table: the bench's cases with a PyTorch 2
    time (PyTorch 2, ropeattn, speed-up), then the end-to-end rows."""
    records = {r["name"]: r for r in json.load(open(bench_path))}
    lines = ["| case | PyTorch 2 | ropeattn | speed-up |", "| --- | ---: | ---: | ---: |"]
    lines += filter(None, (table_row(records, label, names) for label, names in TABLE_ROWS))
    if e2e_path:
        e = json.load(open(e2e_path))
        if "runs" not in e:
            return lines + [f"| end to end | not measured: {e.get('error')} | | |"]
        c = e["config"]
        for phase, tokens in (("prefill", c["prompt"]), ("decode", c["new_tokens"])):
            t, o = (e["runs"][impl][f"{phase}_tokens_per_s"] for impl in ("sdpa", "ropeattn"))
            lines.append(f"| Llama {c['num_hidden_layers']} layers, hidden {c['hidden_size']}: "
                         f"{phase} {tokens} tokens (tokens/s) | {t:.3g} | {o:.3g} | "
                         f"{o / t:.2f}x |")
    return lines


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--only", default=",".join(ALL_CASES))
    parser.add_argument("--e2e", action="store_true")
    parser.add_argument("--prompt", type=int, default=2048)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--markdown", nargs="+", metavar="JSON")
    return parser.parse_args()


def measure(args):
    """The JSON of the first two forms (see the top)."""
    if not args.threads or args.threads < 1 or args.new < 2 or args.prompt < WARMUP_PROMPT \
            or args.rounds < 1:
        raise ValueError("--threads N >= 1 is required; --new >= 2; "
                         f"--prompt >= {WARMUP_PROMPT}; --rounds >= 1")
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - any import failure means "no torch"
        return {"error": f"import torch: {e}"}
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.e2e:
        return e2e(torch, args)
    unknown = [n for n in args.only.split(",") if n not in ALL_CASES]
    if unknown:
        raise ValueError(f"--only: unknown cases {unknown} (known: {ALL_CASES})")
    with torch.no_grad():
        results = kernel_cases(torch, args.only.split(","), args.repeats)
    return {"torch_version": torch.__version__, "threads": torch.get_num_threads(),
            "repeats": args.repeats, "cases": results}


if __name__ == "__main__":
    arguments = parse_args()
    if arguments.markdown:  # errors here are the caller's: they raise
        print("\n".join(markdown(arguments.markdown[0], arguments.markdown[1]
                                 if len(arguments.markdown) > 1 else None)))
        sys.exit(0)
    try:
        answer = measure(arguments)
    except Exception as e:  # noqa: BLE001 - reported to the bench, which goes on
        answer = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(answer))
    sys.stdout.flush()
