#!/usr/bin/env bash
# side_by_side.sh — one decode step of ropeattn beside ggml's CPU flash
# attention and PyTorch 2's SDPA (issue 44 item 5), in one run, at each
# thread count of THREADS_LIST: per thread count, ropeattn-bench's decode
# cases (its read limits and figures), bench/peers/ggml_decode (ggml and
# ropeattn in one process on the same values, samples alternating) and
# bench/peers/sdpa_decode.py (PyTorch 2's SDPA and ropeattn the same way);
# then the machine, the versions and one table of times, ratios and bytes
# read per second.
#   GGML_DIR=/path/to/ggml bash bench/peers/side_by_side.sh [OUT_DIR]
# Run it alone on the machine; on a shared one, LOCK=FILE holds flock FILE
# over each thread count's three stages (about 2 minutes each on 2 cores,
# docs/perf/2026-12-07-side-by-side.md), so no other benchmark runs beside
# them.
# PyTorch's idle OpenMP workers spin after each call (about 5 ms of a core
# at 2 threads here) and ropeattn's time beside them doubled: its stage runs with
# OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=0, which does not slow SDPA's own
# time.  ggml's stage keeps libgomp's default: ggml's barriers are OpenMP
# barriers, which passive slows (ggml alone: about 1.3x at 2 threads), and
# its idle spin ends within the drivers' 20 ms gap.  ropeattn's workers spin
# tens of microseconds, then sleep (src/context.c).  Measured:
# docs/perf/2026-12-07-side-by-side.md, "Idle threads".
# Environment: GGML_DIR (a ggml checkout built with cmake: bench/peers/ggml.sh
# says how), RA_HF_VENV (default .venv-hf, with torch: scripts/setup-hf-venv.sh),
# BUILD (default build, after make), THREADS_LIST (default "1 2"), REPEATS
# (timed samples a case, default 7), LOCK (above).
# Writes OUT_DIR (default $BUILD/peers/side_by_side): bench_tN.json,
# bench_tN.notes, ggml_tN.jsonl, sdpa_tN.jsonl, table.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${GGML_DIR:?side_by_side.sh: set GGML_DIR to a ggml checkout built with cmake}"
BUILD=${BUILD:-$PWD/build}
OUT=${1:-$BUILD/peers/side_by_side}
PY=${RA_HF_VENV:-$PWD/.venv-hf}/bin/python
THREADS_LIST=${THREADS_LIST:-1 2}
REPEATS=${REPEATS:-7}
BENCH_CASES=attention_decode_f32_l4096,attention_decode_f32_l16384,attention_decode_f32_l32768,\
attention_decode_bf16_l16384,attention_decode_int8_l16384,attention_decode_contig_f32_b32,\
attention_decode_paged_f32_b32
[ -x "$PY" ] || { echo "side_by_side.sh: no $PY (bash scripts/setup-hf-venv.sh)" >&2; exit 1; }
[ -x "$BUILD/ropeattn-bench" ] || { echo "side_by_side.sh: no $BUILD/ropeattn-bench (make)" >&2; exit 1; }
BUILD=$BUILD bash bench/peers/ggml.sh >/dev/null
mkdir -p "$OUT"
start=$(date +%s)
for t in $THREADS_LIST; do
    if [ -n "${LOCK:-}" ]; then exec 9>>"$LOCK"; flock 9; fi
    "$BUILD/ropeattn-bench" --json --no-torch --threads "$t" --repeats "$REPEATS" \
        --only "$BENCH_CASES" >"$OUT/bench_t$t.json" 2>"$OUT/bench_t$t.notes" || {
        echo "side_by_side.sh: ropeattn-bench failed:" >&2; cat "$OUT/bench_t$t.notes" >&2; exit 1; }
    "$BUILD/peers/ggml_decode" --threads "$t" --repeats "$REPEATS" >"$OUT/ggml_t$t.jsonl"
    OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=0 "$PY" bench/peers/sdpa_decode.py --threads "$t" \
        --repeats "$REPEATS" --lib "$BUILD/libropeattn.so" >"$OUT/sdpa_t$t.jsonl"
    if [ -n "${LOCK:-}" ]; then flock -u 9; fi
done
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')," \
     "$(($(date +%s) - start)) s"
echo "ggml: $(git -C "$GGML_DIR" log -1 --format='%h (%cs)' 2>/dev/null || echo '?'), $GGML_DIR"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')," \
     "family $(grep -m1 'cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')" \
     "model $(grep -m1 '^model[[:space:]]' /proc/cpuinfo | cut -d: -f2 | tr -d ' '), $(nproc) processors"
echo "compiler: $(${CC:-cc} --version | head -1)"
echo "sdpa stage: OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=0; ggml stage:" \
     "OMP_WAIT_POLICY=${OMP_WAIT_POLICY-unset} GOMP_SPINCOUNT=${GOMP_SPINCOUNT-unset}"
"$PY" bench/peers/side_by_side_table.py "$OUT" $THREADS_LIST | tee "$OUT/table.md"
