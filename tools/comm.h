/*
 * comm.h — the processes a ropeattn command runs as: one, or the ranks of
 * an MPI launch (`mpirun -np P ropeattn attention ...`).  Where Open MPI is
 * installed the build links tools/mpi/comm_mpi.c, which starts MPI when a
 * launcher started the process; elsewhere tools/comm_single.c, which
 * refuses a launch of more than one process.  Under a launch rank 0 alone
 * writes files and talks: the other ranks' stdout goes to /dev/null and
 * their error messages are held until the ranks agree on who prints.
 */
#ifndef RA_CLI_COMM_H
#define RA_CLI_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Before anything else in main: 0, or an exit code (the message printed). */
int cli_comm_begin(int *argc, char ***argv);

/* Last in main: the exit code to return.  Under a launch the ranks agree on
 * code (cli_comm_agree) and finalize MPI, and rank 0 returns it, the others
 * 0 (mpirun's status is the first failing process's, and it ends the job
 * there); code as it is for one process. */
int cli_comm_end(int code);

int cli_comm_rank(void); /* 0 for one process */
int cli_comm_size(void); /* 1 for one process */

/* Every rank's exit code, agreed (a collective: every rank calls it at the
 * same point): the largest, the message of the lowest rank that failed
 * printed once.  One process: code. */
int cli_comm_agree(int code);

/* cli_comm_agree, and that every rank's signature of what it read (a hash:
 * cli_comm_hash) is the same: ranks that read different data (what names
 * it) fail with one message.  One process: code. */
int cli_comm_agree_on(int code, uint64_t signature, const char *what);

/* A 64-bit hash of n bytes, continuing from h (start from 0): eight bytes
 * a step, so that hashing an input costs little beside reading it. */
static inline uint64_t cli_comm_hash(uint64_t h, const void *bytes, size_t n)
{
    const unsigned char *p = bytes;
    for (size_t i = 0; i < n; i += 8) {
        uint64_t w = 0;
        memcpy(&w, p + i, n - i < 8 ? n - i : 8);
        h = (h ^ w) * 0x9E3779B97F4A7C15ull;
        h ^= h >> 29;
    }
    return (h ^ n) * 0xBF58476D1CE4E5B9ull;
}

#endif
