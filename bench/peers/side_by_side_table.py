"""side_by_side_table.py — the table of bench/peers/side_by_side.sh from the
files it wrote in OUT_DIR, one block of rows per thread count.

    python bench/peers/side_by_side_table.py OUT_DIR THREADS...

A row is one ggml_decode case: ropeattn's and ggml's medians from the same
process, PyTorch 2 SDPA's (bench/torch2.py, the case of the same dtype and
length: f32 and bf16 caches only), the ratios of times ropeattn / theirs
(below 1: ropeattn is faster; "behind" marks 1 or more), each one's bytes
read per second (the K and V it reads once, in its own storage) and
ropeattn-bench's median for its case of that name with its fraction of the
read limit it is judged by (a cross-check: another process, other values).
The paged row is ropeattn-bench's paged pool (pages of 16 tokens) against
ggml_decode's f32_b32 (ggml has no paged layout; its 32 masked streams are
the contiguous twin's layout), times from different processes.
"""
import json
import sys

BENCH_OF = {f"{dt}_l{n}": f"attention_decode_{dt}_l{n}" for dt in ("f32", "bf16", "int8")
            for n in (4096, 16384, 32768)}
BENCH_OF["f32_b32"] = "attention_decode_contig_f32_b32"
PAGED = "attention_decode_paged_f32_b32"


def ms(seconds):
    return f"{seconds * 1e3:.3g}" if seconds else "-"


def ratio(ours, theirs):
    if not ours or not theirs:
        return "-"
    r = ours / theirs
    return f"{r:.2f}" + (" behind" if r >= 1 else "")


def rate(nbytes, seconds):
    return f"{nbytes / seconds / 1e9:.1f}" if nbytes and seconds else "-"


def bench_cell(record):
    if not record or not record.get("median_seconds"):
        return "-"
    fraction = record.get("fraction")
    return ms(record["median_seconds"]) + (f" ({fraction:.2f})" if fraction else "")


def load(out, threads):
    bench = {r["name"]: r for r in json.load(open(f"{out}/bench_t{threads}.json"))}
    ggml = [json.loads(line) for line in open(f"{out}/ggml_t{threads}.jsonl") if line.strip()]
    torch = json.load(open(f"{out}/torch2_t{threads}.json"))
    if "error" in torch:
        sys.exit(f"side_by_side_table.py: torch2.py at {threads} threads: {torch['error']}")
    return bench, ggml, torch


def rows(bench, ggml, torch):
    for g in ggml:
        name = g["case"]
        sdpa = torch["cases"].get(f"attention_decode_{name}", {}).get("median_seconds")
        yield (f"| {name} | {g['threads']} | {g['ours_dtype']} / {g['ggml_type']} "
               f"({g['ggml_layout']}) | {ms(g['ours_seconds'])} | {ms(g['ggml_seconds'])} | "
               f"{ms(sdpa)} | {ratio(g['ours_seconds'], g['ggml_seconds'])} | "
               f"{ratio(g['ours_seconds'], sdpa)} | {rate(g['ours_bytes'], g['ours_seconds'])} / "
               f"{rate(g['ggml_bytes'], g['ggml_seconds'])} / {rate(g['ours_bytes'], sdpa)} | "
               f"{bench_cell(bench.get(BENCH_OF.get(name)))} |")
        paged = bench.get(PAGED)
        if name == "f32_b32" and paged and paged.get("median_seconds"):
            t = paged["median_seconds"]
            yield (f"| f32_b32 paged (bench) | {g['threads']} | f32 pages of 16 / f32 "
                   f"({g['ggml_layout']}) | {ms(t)} | {ms(g['ggml_seconds'])} | - | "
                   f"{ratio(t, g['ggml_seconds'])} | - | {rate(g['ours_bytes'], t)} / "
                   f"{rate(g['ggml_bytes'], g['ggml_seconds'])} / - | {bench_cell(paged)} |")


def main(out, thread_counts):
    lines = ["| case | threads | cache: ropeattn / ggml (ggml's layout) | ropeattn ms | ggml ms "
             "| SDPA ms | ropeattn / ggml | ropeattn / SDPA | GB/s: ropeattn / ggml / SDPA "
             "| ropeattn-bench ms (of read) |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    notes = []
    for threads in thread_counts:
        bench, ggml, torch = load(out, threads)
        lines += rows(bench, ggml, torch)
        limits = ", ".join(f"{r['name']} {r['rate']:.1f}" for r in bench.values()
                           if r["name"].startswith("read") and r.get("rate"))
        notes.append(f"{threads} thread(s): torch {torch['torch_version']}; "
                     f"ropeattn-bench's read limits (GB/s): {limits or '-'}")
    print("\n".join(notes + [""] + lines))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: side_by_side_table.py OUT_DIR THREADS...")
    main(sys.argv[1], sys.argv[2:])
