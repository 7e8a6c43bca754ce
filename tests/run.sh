#!/usr/bin/env bash
# Runs every test program under $BUILD/tests (once per SIMD path), the NEON
# test under qemu-user when it is built, every tests/test_*.sh and every
# example program, then prints the total as "N passed, N failed".  Exit
# status 0 only if all passed.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.."
passed=0 failed=0 broken=0
run_one() {
    local out rc
    out=$("$@" 2>&1); rc=$?
    printf '%s\n' "$out"
    local line
    line=$(printf '%s\n' "$out" | grep -E '^[a-z_]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -z "$line" ]; then
        echo "BROKEN: $* exited $rc without a summary line"
        broken=$((broken + 1)); return
    fi
    local p f
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "BROKEN: $* exited $rc"; broken=$((broken + 1))
    fi
}
# The C tests run once per SIMD path this CPU has (RA_FORCE_ISA caps the
# dispatch; a cap above the CPU's level would repeat its best path: skipped).
seen=""
for isa in base avx2 avx512; do
    path=$(RA_FORCE_ISA=$isa "$BUILD"/ropeattn --version 2>/dev/null | sed -n 's/.*simd \([a-z0-9]*\).*/\1/p')
    case " $seen " in *" $path "*)
        echo "SKIPPED SIMD path $isa: this CPU runs $path for it, already tested"; continue ;;
    esac
    seen="$seen $path"
    echo "== SIMD path: $path"
    for t in "$BUILD"/tests/test_*; do
        [ -x "$t" ] && run_one env RA_FORCE_ISA=$isa "$t"
    done
done
# NEON: the kernels built for aarch64 (`make test` builds them when the cross
# compiler is installed), run under qemu-user.
neon="$BUILD/neon/test_neon"
if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    echo "SKIPPED neon: aarch64-linux-gnu-gcc is not installed (bash scripts/install-deps.sh installs it)"
elif ! command -v qemu-aarch64 >/dev/null 2>&1; then
    echo "SKIPPED neon: qemu-aarch64 is not installed (bash scripts/install-deps.sh installs qemu-user)"
elif [ ! -x "$neon" ]; then
    echo "SKIPPED neon: $neon is not built (sanitizer builds leave it out; make neon-test runs it)"
else
    echo "== SIMD path: neon (aarch64, under qemu-aarch64)"
    run_one qemu-aarch64 "$neon"
fi
for t in tests/test_*.sh; do
    [ -f "$t" ] && run_one env BUILD="$BUILD" bash "$t"
done
# Each example program must run and exit 0.
for e in "$BUILD"/examples/*; do
    [ -x "$e" ] || continue
    if "$e" >/dev/null 2>&1; then passed=$((passed + 1)); else echo "FAILED example $e"; failed=$((failed + 1)); fi
done
failed=$((failed + broken))
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
