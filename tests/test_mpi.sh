#!/usr/bin/env bash
# test_mpi.sh — libropeattn_mpi under mpirun: $BUILD/mpi/test_mpi (built
# when mpicc is found) with -np 1, 2, 3 and 4 on this machine, each run
# wrapped in `timeout` so that a hang (a rank waiting on a collective the
# others skipped) fails the suite instead of stalling it.  Skipped (0
# passed) when Open MPI is not installed (scripts/install-deps.sh installs
# openmpi-bin and libopenmpi-dev).
#
# Settings for a container: --oversubscribe (more ranks than cores), root
# allowed (OMPI_ALLOW_RUN_AS_ROOT*, ignored when not root), the shared
# memory transport only (--mca btl self,vader: no network interfaces to
# probe), no other node to reach (--mca plm_rsh_agent false: mpirun never
# looks for ssh); one thread per rank (the test's contexts, OpenBLAS's).
SUITE=mpi
source "$(dirname "$0")/shell_common.sh"
exe=$BUILD/mpi/test_mpi
if ! command -v mpirun >/dev/null 2>&1; then
    echo "SKIPPED mpi: mpirun is not installed (bash scripts/install-deps.sh installs Open MPI)"
    summary
fi
if [ ! -x "$exe" ]; then fail "$exe is not built (make mpi)"; summary; fi
# Under `make asan`: LeakSanitizer skips what Open MPI and OpenBLAS hold at
# exit (tests/mpi/lsan.supp), which it can name only with Open MPI's
# components kept loaded and the slow unwinder (their code has no frame
# pointers); nothing of ropeattn's is suppressed.  No effect otherwise.
# (shell_common.sh's mpi_setup sets all of this.)
mpi_setup
for np in 1 2 3 4; do
    start=$SECONDS
    out=$("${MPIRUN[@]}" -np $np "$exe" 2>&1)
    rc=$?
    line=$(grep -E "^test_mpi P=$np: [0-9]+ passed, 0 failed$" <<<"$out")
    echo "np $np: ${line:-no summary} ($((SECONDS - start)) s)"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        fail "mpirun -np $np: no result within $MPI_LIMIT s (a hang?)"; printf '%s\n' "$out" | tail -20
    elif [ $rc -ne 0 ] || [ -z "$line" ]; then
        fail "mpirun -np $np exited $rc"; printf '%s\n' "$out" | tail -30
    else pass; fi
done
summary
