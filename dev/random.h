/*
 * random.h — a fixed-seed generator for demo and bench data: the same seed
 * gives the same numbers on every machine (splitmix64, 24-bit floats).
 */
#ifndef RA_TOOLS_RANDOM_H
#define RA_TOOLS_RANDOM_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t random_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* x[i] uniform in [-bound, bound), as nn.Linear's init draws weights with
 * bound = 1 / sqrt(in_features). */
static inline void random_uniform(float *x, size_t n, float bound, uint64_t seed)
{
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) {
        float unit = (float)(random_next(&state) >> 40) * 0x1p-24f; /* [0, 1) */
        x[i] = (2.0f * unit - 1.0f) * bound;
    }
}

#endif
