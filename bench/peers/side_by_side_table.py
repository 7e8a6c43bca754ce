"""side_by_side_table.py — the table of bench/peers/side_by_side.sh from the
files it wrote in OUT_DIR, one block of rows per thread count.

    python bench/peers/side_by_side_table.py OUT_DIR THREADS...

A row is one case of bench/peers/ggml_decode: ropeattn's and ggml's medians
from that process and their ratio; then, for the f32 and bf16 caches of one
sequence, ropeattn's and SDPA's medians from bench/peers/sdpa_decode.py's
process and their ratio (times ropeattn / theirs: below 1 ropeattn is
faster; "behind" marks 1 or more); bytes read per second (the K and V each
reads once, in its own storage: ropeattn's from the ggml pair); and
ropeattn-bench's median for its case of that name with its fraction of
the read limit it is judged by (a cross-check: another process, other
values).  The paged row is ropeattn-bench's paged pool (pages of 16 tokens)
against ggml_decode's f32_b32 (ggml has no paged layout; its 32 masked
streams are the contiguous twin's layout): times from different processes.
"""
import json
import sys

BENCH_OF = {f"{dt}_l{n}": f"attention_decode_{dt}_l{n}" for dt in ("f32", "bf16", "int8")
            for n in (4096, 16384, 32768)}
BENCH_OF["f32_b32"] = "attention_decode_contig_f32_b32"
PAGED = "attention_decode_paged_f32_b32"
HEADER = ["| case | threads | cache: ropeattn / ggml (ggml's layout) | ropeattn ms | ggml ms "
          "| ropeattn / ggml | ropeattn ms | SDPA ms | ropeattn / SDPA "
          "| GB/s: ropeattn / ggml / SDPA | ropeattn-bench ms (of read) |",
          "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]


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


def jsonl(path):
    return [json.loads(line) for line in open(path) if line.strip()]


def rows(bench, ggml, sdpa):
    for g in ggml:
        s = sdpa.get(g["case"], {})
        ours, theirs = s.get("ours_seconds"), s.get("sdpa_seconds")
        yield (f"| {g['case']} | {g['threads']} | {g['ours_dtype']} / {g['ggml_type']} "
               f"({g['ggml_layout']}) | {ms(g['ours_seconds'])} | {ms(g['ggml_seconds'])} | "
               f"{ratio(g['ours_seconds'], g['ggml_seconds'])} | {ms(ours)} | {ms(theirs)} | "
               f"{ratio(ours, theirs)} | {rate(g['ours_bytes'], g['ours_seconds'])} / "
               f"{rate(g['ggml_bytes'], g['ggml_seconds'])} / {rate(s.get('bytes'), theirs)} | "
               f"{bench_cell(bench.get(BENCH_OF.get(g['case'])))} |")
        paged = bench.get(PAGED)
        if g["case"] == "f32_b32" and paged and paged.get("median_seconds"):
            t = paged["median_seconds"]
            yield (f"| f32_b32 paged (bench) | {g['threads']} | f32 pages of 16 / f32 "
                   f"({g['ggml_layout']}) | {ms(t)} | {ms(g['ggml_seconds'])} | "
                   f"{ratio(t, g['ggml_seconds'])} | - | - | - | {rate(g['ours_bytes'], t)} / "
                   f"{rate(g['ggml_bytes'], g['ggml_seconds'])} / - | {bench_cell(paged)} |")


def vectors(bench, ggml, sdpa):
    """The CPU and each side's vector kernels on it, from the records: "AMD EPYC
    (family 25, model 1); ropeattn avx2 (256-bit); ggml built for avx avx2 fma
    f16c; torch 2.x (AVX2)"."""
    b = next(iter(bench.values()), {})
    s = next(iter(sdpa.values()), {})
    cpu = f"{b.get('cpu', '-')} (family {b.get('cpu_family', '-')}, model {b.get('cpu_model', '-')})"
    return (f"{cpu}; ropeattn {b.get('simd', '-')} ({b.get('vector_bits', '-')}-bit); ggml built "
            f"for {ggml[0].get('ggml_cpu', '-') if ggml else '-'}; torch "
            f"{s.get('torch_version', '-')} ({s.get('torch_cpu', '-')})")


def main(out, thread_counts):
    lines, notes = list(HEADER), []
    for threads in thread_counts:
        bench = {r["name"]: r for r in json.load(open(f"{out}/bench_t{threads}.json"))}
        sdpa = {r["case"]: r for r in jsonl(f"{out}/sdpa_t{threads}.jsonl")}
        ggml = jsonl(f"{out}/ggml_t{threads}.jsonl")
        lines += rows(bench, ggml, sdpa)
        limits = ", ".join(f"{r['name']} {r['rate']:.1f}" for r in bench.values()
                           if r["name"].startswith("read") and r.get("rate"))
        notes.append(f"{threads} thread(s): {vectors(bench, ggml, sdpa)}; ropeattn-bench's "
                     f"read limits (GB/s): {limits or '-'}")
    print("\n".join(notes + [""] + lines))


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: side_by_side_table.py OUT_DIR THREADS...")
    main(sys.argv[1], sys.argv[2:])
