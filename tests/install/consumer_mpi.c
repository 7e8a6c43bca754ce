/*
 * consumer_mpi.c — a program that uses an installed libropeattn_mpi, built
 * by tests/test_install.sh through pkg-config (shared and static).  It
 * calls the layout function, which needs no MPI_Init, and prints "zigzag
 * <start0> <count0> <start1> <count1>" for rank 1 of 3 over 20 tokens.
 */
#include <stdio.h>

#include <ropeattn_mpi.h>

int main(void)
{
    int64_t start[2], count[2];
    if (ra_mpi_zigzag(20, 3, 1, start, count) != RA_OK) {
        printf("%s\n", ra_mpi_last_error());
        return 1;
    }
    printf("zigzag %lld %lld %lld %lld\n", (long long)start[0], (long long)count[0],
           (long long)start[1], (long long)count[1]);
    return 0;
}
