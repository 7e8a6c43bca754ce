#!/usr/bin/env bash
# Builds the libFuzzer targets (make fuzz) and runs each for SECONDS seconds
# (default 60) on its committed seed corpus fuzz/corpus/<target>/ (read
# only: new inputs go to a temporary folder) with fuzz/<target>.dict when
# there is one.  A crash, a sanitizer report or a broken check stops that
# target; its input is kept as $FUZZ_BUILD/artifacts/<target>-crash-*.
# Runs FUZZ_JOBS targets at a time (default: one per CPU).  Prints each
# target's executions (libFuzzer's stat::number_of_executed_units) and a
# summary line; exits 1 if any target failed.
#
#   bash scripts/fuzz.sh [SECONDS]
set -u
cd "$(dirname "$0")/.."
seconds=${1:-60}
FUZZ_BUILD=${FUZZ_BUILD:-build/fuzz}
make -j"$(nproc)" fuzz FUZZ_BUILD="$FUZZ_BUILD" >/dev/null || { echo "fuzz: the build failed"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$FUZZ_BUILD/artifacts"
run_target() { # target: runs it into $work/NAME.log and $work/NAME.rc
    local target=$1 name dict=()
    name=$(basename "$target")
    mkdir -p "$work/$name"
    [ -f "fuzz/$name.dict" ] && dict=(-dict="fuzz/$name.dict")
    "$target" -max_total_time="$seconds" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$FUZZ_BUILD/artifacts/$name-" "${dict[@]}" \
        "$work/$name" "fuzz/corpus/$name" >"$work/$name.log" 2>&1
    echo $? >"$work/$name.rc"
}
jobs_max=${FUZZ_JOBS:-$(nproc)}
for target in "$FUZZ_BUILD"/fuzz_*; do
    [ -x "$target" ] || continue
    run_target "$target" &
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
done
wait
passed=0 failed=0 summary=""
for target in "$FUZZ_BUILD"/fuzz_*; do
    [ -x "$target" ] || continue
    name=$(basename "$target")
    rc=$(cat "$work/$name.rc")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$name.log" | tail -n 1)
    if [ "$rc" -eq 0 ] && [ -n "$execs" ]; then
        passed=$((passed + 1))
        echo "fuzz ${name#fuzz_}: ${execs} executions in ${seconds} s, no crash"
    else
        failed=$((failed + 1))
        echo "FAILED fuzz ${name#fuzz_}: exit $rc after ${execs:-?} executions; the log ends:"
        tail -n 40 "$work/$name.log"
    fi
    summary="$summary ${name#fuzz_}=${execs:-?}"
done
echo "fuzz executions (${seconds} s each):$summary"
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
