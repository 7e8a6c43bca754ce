# shell_common.sh — sourced by the shell tests (SUITE set first): the built
# ropeattn ($RA) and developer programs ($RA_BENCH, $RA_DEMO, $RA_TRAIN_DEMO),
# the Python with numpy ($PY; tests/ on its path, for
# st_read.py), a temporary folder ($TMP, removed on exit) and the counters.  summary prints "$SUITE: N passed,
# N failed" and exits 1 if anything failed.
set -u
BUILD=${BUILD:-build}
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
RA=${RA_CLI:-$BUILD/ropeattn} # RA_CLI: another build of it (tests/test_cli_shared.sh)
RA_BENCH=$BUILD/ropeattn-bench RA_DEMO=$BUILD/ropeattn-demo
RA_TRAIN_DEMO=$BUILD/ropeattn-train-demo
PY=/usr/bin/python3
export PYTHONPATH="$PWD/tests${PYTHONPATH:+:$PYTHONPATH}"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
passed=0 failed=0

# One case by name: RA_CASE=GLOB or a suite's first argument (`bash
# tests/test_hf.sh 'llama_yarn*'`) runs the checkpoints whose name matches
# alone, in the suites that call case_chosen NAME (test_hf.sh,
# test_families.sh), and the suite's checks of no checkpoint.
RA_CASE=${1:-${RA_CASE:-}}
case_chosen() { [ -z "$RA_CASE" ] || [[ $1 == $RA_CASE ]]; }
# Whether ropeattn is an ASan build (whose runs cost ~5 times a plain one's):
# the suites that sample their cases there (docs/TESTING.md).
asan_build() { grep -q __asan_init "$RA" 2>/dev/null; }

pass() { passed=$((passed + 1)); }
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
summary() { echo "$SUITE: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

# attention_refused STATUS TEXT ARGS...: `ropeattn attention ARGS` fails with
# STATUS, its message naming TEXT, and writes no --output (the suites of
# the attention layer's modes: test_vision_cli.sh, test_token_types_cli.sh).
attention_refused() {
    local want=$1 text=$2
    shift 2
    "$RA" attention "$@" --output "$TMP/out.npy" 2>"$TMP/err"
    local got=$?
    if [ "$got" -eq "$want" ] && grep -q -- "$text" "$TMP/err" && [ ! -e "$TMP/out.npy" ]; then
        pass
    else
        fail "refused $text: status $got: $(cat "$TMP/err")"
    fi
}

# For the suites that launch under mpirun (settings as tests/test_mpi.sh
# explains them): root allowed, one OpenBLAS thread a rank, LeakSanitizer's
# Open MPI suppressions under `make asan`; MPIRUN: mpirun on this machine
# alone (shared memory, no ssh, more ranks than cores) inside a timeout of
# MPI_LIMIT seconds (RA_MPI_TIMEOUT, 60), so that a hang fails the suite.
mpi_setup() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
    export OMPI_MCA_mca_base_component_disable_dlclose=1
    export LSAN_OPTIONS=${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$PWD/tests/mpi/lsan.supp
    export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0
    MPI_LIMIT=${RA_MPI_TIMEOUT:-60}
    MPIRUN=(timeout -k 5 "$MPI_LIMIT" mpirun --oversubscribe --mca btl self,vader
            --mca plm_rsh_agent false)
}

# Ends the suite (with its summary) unless ropeattn is built and $PY has
# numpy.  Then, with RA_CLI_WRAPPER set, $RA becomes a script that runs
# ropeattn through that command prefix (`make valgrind-cli`: valgrind
# memcheck).  The developer programs run as they are: they time a
# LLaMA-shaped layer or train for hundreds of steps (the demo alone takes
# over ten minutes under memcheck); `make asan` runs them, with the rest of
# the suites, under ASan.
require_ropeattn_and_numpy() {
    if [ ! -x "$RA" ]; then fail "$RA is not built"; summary; fi
    if ! "$PY" -c 'import numpy' 2>/dev/null; then
        fail "$PY with numpy is required (apt-get install python3-numpy)"; summary
    fi
    [ -n "${RA_CLI_WRAPPER:-}" ] || return 0
    cat >"$TMP/ropeattn" <<WRAPPER
#!/bin/sh
exec $RA_CLI_WRAPPER "$RA" "\$@"
WRAPPER
    chmod +x "$TMP/ropeattn"
    RA=$TMP/ropeattn
}
