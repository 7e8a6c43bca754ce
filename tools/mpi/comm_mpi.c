/*
 * comm_mpi.c — comm.h with MPI: a process started by a launcher (Open
 * MPI's mpirun sets OMPI_COMM_WORLD_SIZE, MPICH's and Slurm's PMI_SIZE,
 * PMIx launchers PMIX_RANK) joins MPI_COMM_WORLD; any other runs alone
 * without initializing MPI at all.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "cli.h"
#include "comm.h"
#include "outputs.h"

static int started, rank, size = 1;

int cli_comm_begin(int *argc, char ***argv)
{
    if (!getenv("OMPI_COMM_WORLD_SIZE") && !getenv("PMI_SIZE") && !getenv("PMIX_RANK"))
        return 0;
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return cli_fail(EXIT_FAIL, "MPI_Init_thread failed");
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank > 0) {
        cli_hold_messages();
        cli_signals_quiet();
        if (!freopen("/dev/null", "w", stdout))
            return cli_fail(EXIT_FAIL, "rank %d: cannot send its standard output to /dev/null",
                            rank);
    }
    uint64_t h = 0; /* an MPMD launch may give the ranks different ones */
    for (int i = 0; i < *argc; i++) h = cli_comm_hash(h, (*argv)[i], strlen((*argv)[i]) + 1);
    return cli_comm_agree_on(0, h, "command lines");
}

int cli_comm_rank(void)
{
    return rank;
}

int cli_comm_size(void)
{
    return size;
}

/* Agrees on code at a point every rank must reach (last: the end of
 * main).  A rank that finished while others had not means the ranks ran
 * different commands (an MPMD launch, or a failure one rank met alone before
 * a point the others reached): the run fails there, and no rank makes
 * another collective call but MPI_Finalize. */
static int agree(int code, int last)
{
    static int ended;
    if (!started) return code;
    if (ended) return code ? code : EXIT_FAIL;
    /* MAX of: the code, -(a failing rank), last, -last */
    int v[4] = {code, code ? -rank : INT_MIN, last, -last};
    if (MPI_Allreduce(MPI_IN_PLACE, v, 4, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return cli_fail(EXIT_FAIL, "rank %d: MPI_Allreduce failed", rank);
    if (code && -v[1] == rank) cli_print_held();
    const int mixed = v[2] == 1 && v[3] == 0; /* some ranks at the end, some not */
    if (mixed) ended = 1;
    if (mixed && !v[0])
        return cli_fail(EXIT_FAIL, "the ranks of the launch did not run the same command "
                        "(some had finished where others had not)");
    return v[0] ? v[0] : 0;
}

int cli_comm_agree(int code)
{
    return agree(code, 0);
}

int cli_comm_agree_on(int code, uint64_t signature, const char *what)
{
    code = agree(code, 0);
    if (code || !started) return code;
    /* the largest and the smallest signature (as the largest of its
     * complement) */
    uint64_t v[2] = {signature, ~signature};
    if (MPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return cli_fail(EXIT_FAIL, "rank %d: MPI_Allreduce failed", rank);
    if (v[0] == ~v[1]) return 0;
    return cli_fail(EXIT_FAIL, "the ranks of the launch differ in their %s (every rank must be "
                    "given the same arguments and files)", what);
}

int cli_comm_end(int code)
{
    if (!started) return code;
    code = agree(code, 1);
    fflush(stdout);
    MPI_Finalize();
    /* rank 0's exit status is the launch's: mpirun ends the job at the
     * first failing process, and the others need not race it */
    return rank == 0 ? code : 0;
}
