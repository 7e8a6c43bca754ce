#!/usr/bin/env bash
# torch2_table.sh — the PyTorch 2 comparison (issue 40) in one run, at one
# thread count: ropeattn-bench over the attention and RoPE cases with its
# vs torch2 column (bench/torch2.py, PyTorch 2 at the same threads), then a
# Llama-shaped model end to end, "sdpa" against "ropeattn" (bench/torch2.py
# --e2e), then the machine, the versions and the table (Markdown) from both.
# About 4 minutes on 2 quiet cores (docs/perf/2026-12-06-torch2.md).
#   bash bench/torch2_table.sh [OUT_DIR]      (make bench-torch2)
# Environment: RA_HF_VENV (the venv of scripts/setup-hf-venv.sh, default
# .venv-hf; its ropeattn is the one timed end to end, so run that script
# again after changing python/), BUILD (default build), THREADS (default
# nproc), REPEATS (timed samples a case, default 3; S 8192 takes fewer),
# ROUNDS (end-to-end rounds of each implementation, alternating, the
# fastest kept; default 1: about 2 more minutes a round).
# Writes OUT_DIR (default $BUILD/torch2): bench.json, bench.notes, e2e.json,
# table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${RA_HF_VENV:-$PWD/.venv-hf}
BUILD=${BUILD:-$PWD/build}
OUT=${1:-$BUILD/torch2}
THREADS=${THREADS:-$(nproc)}
PY=$VENV/bin/python
CASES=rope_half_f32,attention_prefill_f32_s512,attention_prefill_f32_s2048,\
attention_prefill_f32_s8192,attention_prefill_bf16_s512,attention_prefill_bf16_s2048,\
attention_prefill_bf16_s8192,attention_decode_f32_l4096,attention_decode_f32_l16384,\
attention_decode_bf16_l16384
[ -x "$PY" ] || { echo "torch2_table.sh: no $PY (bash scripts/setup-hf-venv.sh)" >&2; exit 1; }
[ -x "$BUILD/ropeattn-bench" ] || { echo "torch2_table.sh: no $BUILD/ropeattn-bench (make)" >&2; exit 1; }
mkdir -p "$OUT"
start=$(date +%s)
RA_BENCH_TORCH2=$PY "$BUILD/ropeattn-bench" --no-torch --json --threads "$THREADS" \
    --repeats "${REPEATS:-3}" --only "$CASES" >"$OUT/bench.json" 2>"$OUT/bench.notes"
grep -q "note: vs torch2" "$OUT/bench.notes" || {
    echo "torch2_table.sh: PyTorch 2 was not timed:" >&2; cat "$OUT/bench.notes" >&2; exit 1; }
"$PY" bench/torch2.py --threads "$THREADS" --e2e --rounds "${ROUNDS:-1}" >"$OUT/e2e.json" \
    2>"$OUT/e2e.stderr"
"$PY" - "$OUT/e2e.json" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))
if "error" in e:
    sys.exit(f"torch2_table.sh: end to end: {e['error']}")
print(f"torch {e['torch_version']}, transformers {e['transformers_version']}")
print(f"end to end: ropeattn {e['ropeattn_file']}; first logits rel diff {e['rel_diff']:.2g}, "
      f"{e['same_tokens']} of {e['config']['new_tokens']} greedy tokens the same")
for phase in ("prefill", "decode"):
    t = {impl: (r[f"{phase}_seconds"], r[f"{phase}_attention_seconds"])
         for impl, r in e["runs"].items()}
    total, attention = t["sdpa"]
    print(f"end to end {phase}: attention {attention:.3g} s of sdpa's {total:.3g} s, "
          f"{t['ropeattn'][1]:.3g} s of ropeattn's {t['ropeattn'][0]:.3g} s: the most a faster "
          f"attention alone can gain over sdpa is {total / (total - attention):.2f}x")
EOF
echo "date: $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
     "$(($(date +%s) - start)) s"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
     "$(nproc) processors; $THREADS threads"
echo "openblas env: $(env | grep '^OPENBLAS_' | tr '\n' ' ' || true)(the bench sets" \
     "OPENBLAS_THREAD_TIMEOUT=4 and drops OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE)"
grep "^note:" "$OUT/bench.notes"
"$PY" bench/torch2.py --markdown "$OUT/bench.json" "$OUT/e2e.json" | tee "$OUT/table.md"
