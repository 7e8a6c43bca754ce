#!/usr/bin/env bash
# Runs every test program under $BUILD/tests (each checks every SIMD path
# itself), the NEON test under qemu-user when it is built, every
# tests/test_*.sh and every example program, then prints the total as "N
# passed, N failed".  Exit status 0 only if all passed.  They run
# RA_TEST_JOBS at a time (default: one per CPU), each into its own log,
# printed in order when all are done, each headed by its wall time and CPU
# time (user + system, its child processes' included).
# tests/test_mpi.sh runs the MPI library's test under mpirun -np 1-4 (it
# says SKIPPED when Open MPI is not installed).
# RA_TEST (`make test T=...`): the programs and suites to run, by name
# (test_rope, test_cli: space-separated), the others and the examples left
# out; the summary counts those alone.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
passed=0 failed=0 broken=0
jobs_max=${RA_TEST_JOBS:-$(nproc)}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
n=0
queue() { # runs "$@" in the background into $logs/N.{out,rc,cmd,s,cpu}
    printf '%s\n' "$*" >"$logs/$n.cmd"
    ( start=$SECONDS TIMEFORMAT='%1U + %1S'
      { time { "$@" >"$logs/$n.out" 2>&1; echo $? >"$logs/$n.rc"; }; } 2>"$logs/$n.cpu"
      echo $((SECONDS - start)) >"$logs/$n.s" ) &
    n=$((n + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n; done
}
chosen() { # path: whether RA_TEST names it (its file name without .sh), or is unset
    local name=${1##*/}
    [ -z "${RA_TEST:-}" ] || [[ " $RA_TEST " == *" ${name%.sh} "* ]]
}
tally() { # i: prints job i's output and counts its summary line
    local out rc cmd line p f
    out=$(cat "$logs/$1.out"); rc=$(cat "$logs/$1.rc"); cmd=$(cat "$logs/$1.cmd")
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '^[a-z][a-z0-9_]*: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "BROKEN: $cmd exited $rc without a summary line"
        broken=$((broken + 1)); return
    fi
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "BROKEN: $cmd exited $rc"; broken=$((broken + 1))
    fi
}
# The shell suites first: they take longest (test_families.sh, test_cli.sh),
# and a long job queued last would run alone on one CPU at the end.
for t in tests/test_*.sh; do
    [ -f "$t" ] && chosen "$t" && queue env BUILD="$BUILD" bash "$t"
done
# The C tests run once each: a test runs its cases that reach the SIMD
# kernels on every path this CPU has, in one process (tests/harness.h:
# ra_test_each_isa), and prints the paths it ran; RA_FORCE_ISA, if set here,
# caps them.
for t in "$BUILD"/tests/test_*; do
    [ -x "$t" ] && chosen "$t" && queue "$t"
done
# NEON: the kernels built for aarch64 (`make test` builds them when the cross
# compiler is installed), run under qemu-user.
neon="$BUILD/neon/test_neon"
if ! chosen test_neon; then :
elif ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    echo "SKIPPED neon: aarch64-linux-gnu-gcc is not installed (bash scripts/install-deps.sh installs it)"
elif ! command -v qemu-aarch64 >/dev/null 2>&1; then
    echo "SKIPPED neon: qemu-aarch64 is not installed (bash scripts/install-deps.sh installs qemu-user)"
elif [ ! -x "$neon" ]; then
    echo "SKIPPED neon: $neon is not built (sanitizer builds leave it out; make neon-test runs it)"
else
    queue qemu-aarch64 "$neon"
fi
wait
for ((i = 0; i < n; i++)); do
    echo "== $(cat "$logs/$i.cmd") ($(cat "$logs/$i.s") s; CPU user + sys $(cat "$logs/$i.cpu") s)"
    tally "$i"
done
# Each example program must run and exit 0.
for e in "$BUILD"/examples/*; do
    [ -x "$e" ] && [ -z "${RA_TEST:-}" ] || continue
    if "$e" >/dev/null 2>&1; then passed=$((passed + 1)); else echo "FAILED example $e"; failed=$((failed + 1)); fi
done
failed=$((failed + broken))
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
