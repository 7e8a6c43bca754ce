/*
 * fuzz_check.h — how a fuzz target reports a broken promise: it prints what
 * went wrong and aborts, which libFuzzer records as a crash (and saves the
 * input as an artifact to reproduce it).
 */
#ifndef RA_FUZZ_CHECK_H
#define RA_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "FUZZ CHECK FAILED %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
            abort();                                                           \
        }                                                                      \
    } while (0)

#endif
