/*
 * comm_single.c — comm.h for a ropeattn built without MPI: one process.  A
 * launcher that started several (Open MPI's OMPI_COMM_WORLD_SIZE, MPICH's
 * and Slurm's PMI_SIZE) would have them all write the same files, so
 * that is refused.
 */
#include <stdlib.h>

#include "cli.h"
#include "comm.h"

int cli_comm_begin(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (int i = 0; i < 2; i++) {
        const char *n = getenv(vars[i]);
        if (n && atoi(n) > 1)
            return cli_fail(EXIT_USAGE, "started as one of %d processes (%s), and this ropeattn "
                            "was built without MPI: rebuild it with Open MPI installed "
                            "(libopenmpi-dev)", atoi(n), vars[i]);
    }
    return 0;
}

int cli_comm_end(int code)
{
    return code;
}

int cli_comm_rank(void)
{
    return 0;
}

int cli_comm_size(void)
{
    return 1;
}

int cli_comm_agree(int code)
{
    return code;
}

int cli_comm_agree_on(int code, uint64_t signature, const char *what)
{
    (void)signature;
    (void)what;
    return code;
}
